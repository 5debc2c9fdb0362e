package main

import (
	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/podenv"
	"github.com/nodekit/nodekit/volume"
)

// podSources builds what the CRI manager needs of the apiserver for pods'
// environments and volumes: configMaps, secrets and services through a
// cache, service-account tokens through the TokenRequest API. client-go's
// typed clients fill the objects package's interfaces as they are.
func podSources(cs kubernetes.Interface, o *options, log logr.Logger) (*podenv.Resolver, *volume.Manager, error) {
	core := cs.CoreV1()
	cache := objects.New(objects.Config{
		ConfigMaps: func(ns string) objects.ConfigMapGetter { return core.ConfigMaps(ns) },
		Secrets:    func(ns string) objects.SecretGetter { return core.Secrets(ns) },
		Services:   func(ns string) objects.ServiceLister { return core.Services(ns) },
		TTL:        o.objectCacheTTL,
	})
	tokens := objects.NewTokens(objects.TokensConfig{
		ServiceAccounts: func(ns string) objects.TokenCreator { return core.ServiceAccounts(ns) },
		Log:             log.WithName("tokens"),
	})
	vols, err := volume.New(volume.Config{PodsRoot: o.podsRoot, Objects: cache, Tokens: tokens, Log: log.WithName("volumes")})
	if err != nil {
		return nil, nil, err
	}
	return podenv.New(podenv.Config{Objects: cache, Services: cache, HostIPs: o.nodeIPs}), vols, nil
}
