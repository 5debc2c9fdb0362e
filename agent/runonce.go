package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podmanager"
	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/syncloop"
)

// ErrNoStaticSource is returned by RunOnce when neither StaticPodPath nor
// ManifestURL is configured.
var ErrNoStaticSource = errors.New("agent: run-once needs StaticPodPath or ManifestURL")

// RunOnce is the kubelet's --runonce: it reads the static sources
// (StaticPodPath and ManifestURL; the apiserver and Config.Sources are not
// read) until each has delivered its pods once, admits them oldest first
// (as Run does: MaxPods, privileged, host namespaces and, with
// Config.Node, the Node's checks against the Node it would register,
// which RunOnce does not register), runs each admitted pod until its
// containers run or it has completed, and returns one result per pod,
// oldest first. A result's Pod is a copy carrying the status the agent
// generated; its Err says why the pod did not run (admission, the runtime,
// or syncloop.ErrPodNotRunning after the retries). The pods are left as
// they are, running; their statuses are kept (Pods, Status), not sent to an
// apiserver. Run and RunOnce exclude each other; either may be called
// once. opts tune the run as syncloop.RunOnce's: the zero value is its
// defaults (wait 1s for the manifests, retry a pod 10 times from 1s,
// doubling); opts.Clock and opts.Log default to the agent's.
func (a *Agent) RunOnce(ctx context.Context, opts syncloop.RunOnceConfig) ([]syncloop.PodResult, error) {
	c := a.cfg
	if c.StaticPodPath == "" && c.ManifestURL == "" {
		return nil, ErrNoStaticSource
	}
	if !a.started.CompareAndSwap(false, true) {
		return nil, errors.New("agent: Run or RunOnce called twice")
	}
	if opts.Clock == nil {
		opts.Clock = c.Clock
	}
	if opts.Log.GetSink() == nil {
		opts.Log = c.Log.WithName("runonce")
	}
	if st, err := c.Runtime.Status(ctx); err != nil {
		return nil, fmt.Errorf("agent: runtime status: %w", err)
	} else if !st.Ready() {
		return nil, fmt.Errorf("agent: runtime not ready: %+v", st.Conditions)
	}
	a.setRuntimeErr(nil)
	a.runOnce = true

	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	spawn := func(name string, ctx context.Context, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				a.log.Error(err, "Source stopped", "source", name)
			}
		}()
	}
	// Snapshot: every update is the SET of all pods so far, and a source's
	// first SET is delivered even when it holds no pod.
	podCfg, err := podconfig.NewPodConfig(podconfig.Snapshot, podconfig.Options{
		Log: c.Log.WithName("podconfig"), Clock: c.Clock, Recorder: c.Recorder,
	})
	if err != nil {
		return nil, err
	}
	if err := a.startSources(sctx, sctx, podCfg, spawn, true); err != nil {
		return nil, err
	}
	// Hand syncloop.RunOnce the snapshot taken once every static source has
	// spoken, so that a manifest URL answering after the files is not lost.
	// Admission is decided here, oldest pod first as the kubelet admits, so
	// that MaxPods keeps the same pods whatever order they then run in.
	first := make(chan podconfig.PodUpdate, 1)
	rejected := map[*v1.Pod]error{}
	spawn("snapshot", sctx, func(ctx context.Context) error {
		seen := sets.New[string]()
		for {
			select {
			case <-ctx.Done():
				return nil
			case u := <-podCfg.Updates():
				seen.Insert(u.Source)
				if !podCfg.SeenAllSources(seen) {
					continue
				}
				pods := append([]*v1.Pod(nil), u.Pods...)
				podmanager.SortByCreation(pods)
				var admitted []*v1.Pod
				used := admission.NewUsage(nil)
				for _, pod := range pods {
					if r := admission.Admit(a.cfg.AdmitHandlers, &admission.PodAdmitAttributes{Pod: pod, OtherPods: admitted, OtherPodsUsage: used}); !r.Admit {
						a.reject(pod, r.Reason, r.Message)
						rejected[pod] = fmt.Errorf("rejected (%s): %s", r.Reason, r.Message)
						continue
					}
					admitted = append(admitted, pod)
					used.Add(pod)
					a.pods.AddOrUpdate(pod)
				}
				u.Pods = pods
				first <- u // happens before RunOnce reads rejected
				return nil
			}
		}
	})

	run := func(ctx context.Context, pod *v1.Pod) (bool, error) {
		if err := rejected[pod]; err != nil {
			return false, err
		}
		return a.runPodOnce(ctx, pod)
	}
	results, err := syncloop.RunOnce(ctx, first, run, opts)
	cancel()
	if err != nil {
		return nil, err
	}
	for i, r := range results {
		cp := r.Pod.DeepCopy()
		if st, ok := a.status.GetPodStatus(cp.UID); ok {
			cp.Status = st
		}
		results[i].Pod = cp
	}
	return results, nil
}

// runPodOnce is RunOnce's step for one admitted pod: sync it as a pod
// worker would until every container runs or it is done.
func (a *Agent) runPodOnce(ctx context.Context, pod *v1.Pod) (bool, error) {
	rs, err := a.cfg.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return false, fmt.Errorf("pod status: %w", err)
	}
	if allRunning(pod, rs) {
		// Record what the runtime now runs.
		a.storeStatus(pod, a.generate(pod, rs, false))
		return true, nil
	}
	done, err := (*syncer)(a).SyncPod(ctx, 0, pod, nil, rs)
	if done {
		return true, nil
	}
	if err != nil && !errors.Is(err, podworkers.ErrTransient) {
		return false, err
	}
	// Not there yet (or backing off): syncloop retries after its delay.
	return false, nil
}

// allRunning reports whether every regular container of pod runs, the
// kubelet's isPodRunning.
func allRunning(pod *v1.Pod, rs *runtime.PodStatus) bool {
	for _, c := range pod.Spec.Containers {
		cs := rs.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != runtime.ContainerStateRunning {
			return false
		}
	}
	return true
}
