package agent

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/runtime"
)

// newEviction builds the eviction manager of Config.Eviction, filling what
// the agent knows: the active pods, the kill path of critical pod
// preemption (Evicted instead of Preempting), the pods' cleanup, container
// and image GC over the runtime, the Node's reference, clock, recorder and
// log.
func (a *Agent) newEviction() (*eviction.Manager, error) {
	c := a.cfg
	ec := *c.Eviction
	if ec.ActivePods == nil {
		ec.ActivePods = func() []*v1.Pod { return a.activePods("") }
	}
	if ec.Killer == nil {
		ec.Killer = eviction.PodKillerFunc(a.evictPod)
	}
	if ec.PodCleanedUp == nil {
		ec.PodCleanedUp = func(p *v1.Pod) bool { return a.workers.IsPodKnownTerminated(p.UID) }
	}
	if gc, ok := c.Runtime.(runtime.GarbageCollector); ok && ec.ContainerGC == nil {
		ec.ContainerGC = eviction.ReclaimFunc(func(ctx context.Context) error {
			ready := a.sourcesReady.Load()
			return gc.GarbageCollect(ctx, a.containerGCPolicy(), ready != nil && (*ready)())
		})
	}
	if a.imageGC != nil && ec.ImageGC == nil {
		ec.ImageGC = eviction.ReclaimFunc(func(ctx context.Context) error { return a.imageGC.deleteUnused(ctx, c.Clock.Now()) })
	}
	if ec.NodeRef == nil {
		// The kubelet's node reference: the name as UID.
		ec.NodeRef = &v1.ObjectReference{Kind: "Node", Name: c.NodeName, UID: types.UID(c.NodeName)}
	}
	if ec.Recorder == nil && c.Recorder != nil {
		ec.Recorder = c.Recorder
	}
	if ec.Clock == nil {
		ec.Clock = c.Clock
	}
	if ec.Log.GetSink() == nil {
		ec.Log = c.Log.WithName("eviction")
	}
	m, err := eviction.New(ec)
	if err != nil {
		return nil, fmt.Errorf("eviction: %w", err)
	}
	return m, nil
}

// Eviction returns the eviction manager of Config.Eviction, or nil.
func (a *Agent) Eviction() *eviction.Manager { return a.eviction }

// evictPod is the eviction manager's kill: the pod's worker stops it with
// the grace period and status the manager gives, and evictPod waits for
// its containers as killPodNow does for a preempted pod.
func (a *Agent) evictPod(ctx context.Context, pod *v1.Pod, opts eviction.KillOptions) error {
	done, timeout, err := a.killPodNow(pod, opts.GracePeriodSeconds, opts.UpdateStatus)
	if err != nil {
		return err
	}
	return a.waitKilled(ctx, pod, done, timeout)
}
