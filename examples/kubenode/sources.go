package main

import (
	"context"
	"sync/atomic"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/podenv"
	"github.com/nodekit/nodekit/volume"
)

// podSources builds what the CRI manager needs of the apiserver for pods'
// environments and volumes: configMaps and secrets through a cache that
// watches each one read (the kubelet's Watch strategy), each namespace's
// services through a watch on them (as the kubelet's service informer),
// service-account tokens through the TokenRequest API.
// client-go's typed clients fill the objects package's interfaces as they
// are. stop ends the watches and waits for them.
func podSources(ctx context.Context, cs *clientset, o *options, rec record.EventRecorder, alloc func() v1.ResourceList, log logr.Logger) (env *podenv.Resolver, vols *volume.Manager, stop func(), err error) {
	core := cs
	cache := objects.New(objects.Config{
		ConfigMaps: func(ns string) objects.ConfigMapGetter { return core.ConfigMaps(ns) },
		Secrets:    func(ns string) objects.SecretGetter { return core.Secrets(ns) },
		Services:   func(ns string) objects.ServiceLister { return core.Services(ns) },
		TTL:        o.objectCacheTTL,
		Watch:      true,
	})
	tokens := objects.NewTokens(objects.TokensConfig{
		ServiceAccounts: func(ns string) objects.TokenCreator { return core.ServiceAccounts(ns) },
		Log:             log.WithName("tokens"),
	})
	vols, err = volume.New(volume.Config{PodsRoot: o.cri.PodsRoot, Objects: cache, Tokens: tokens, NodeAllocatable: alloc, Recorder: rec, Log: log.WithName("volumes")})
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { cache.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	return podenv.New(podenv.Config{Objects: cache, Services: cache, HostIPs: o.nodeIPs, NodeAllocatable: alloc, Recorder: rec}), vols, stop, nil
}

// allocatableOf returns the allocatable resources of the Node the agent
// last sent, once it runs; none before.
func allocatableOf(a *atomic.Pointer[agent.Agent]) func() v1.ResourceList {
	return func() v1.ResourceList {
		ag := a.Load()
		if ag == nil || ag.Node() == nil {
			return nil
		}
		if n := ag.Node().Node(); n != nil {
			return n.Status.Allocatable
		}
		return nil
	}
}
