package agent

import (
	"context"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

// gatedRuntime holds the first SyncPod of a pod until released (or its
// context ends) and records whether that context was cancelled.
type gatedRuntime struct {
	*fake.Runtime
	uid      types.UID
	entered  chan struct{}
	release  chan struct{}
	once     sync.Once
	mu       sync.Mutex
	ctxErr   error
	returned bool
}

func newGatedRuntime(t *testing.T, uid types.UID) *gatedRuntime {
	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &gatedRuntime{Runtime: rt, uid: uid, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedRuntime) SyncPod(ctx context.Context, pod *v1.Pod, st *runtime.PodStatus, s []v1.Secret, b *runtime.Backoff) runtime.PodSyncResult {
	first := false
	if pod.UID == g.uid {
		g.once.Do(func() { first = true })
	}
	if first {
		close(g.entered)
		select {
		case <-g.release:
		case <-ctx.Done():
		}
		g.mu.Lock()
		g.ctxErr, g.returned = ctx.Err(), true
		g.mu.Unlock()
	}
	return g.Runtime.SyncPod(ctx, pod, st, s, b)
}

func (g *gatedRuntime) result() (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.returned, g.ctxErr
}

// A pod deleted while the runtime creates it: the kubelet's runtime SyncPod
// runs on context.WithoutCancel, so what the runtime has begun (a sandbox,
// a container) is finished, and the kill follows; cancelling it in flight
// throws the runtime's work away.
func TestDeletedPodsRuntimeSyncRunsToItsEnd(t *testing.T) {
	pod := newPod("deleted-while-starting", v1.RestartPolicyAlways, "c")
	rt := newGatedRuntime(t, pod.UID)
	r := start(t, fastConfig(rt))
	r.set(pod)
	<-rt.entered
	r.set() // the pod is gone from the source: the workers kill it
	waitFor(t, "the kill requested", func() bool { return r.a.workers.IsPodTerminationRequested(pod.UID) })
	if returned, err := rt.result(); returned {
		t.Fatalf("the runtime's SyncPod ended when the pod was deleted (context: %v); want it to run to its end", err)
	}
	close(rt.release)
	waitFor(t, "the sync returned", func() bool { returned, _ := rt.result(); return returned })
	if _, err := rt.result(); err != nil {
		t.Fatalf("the runtime's SyncPod context was cancelled: %v", err)
	}
	waitFor(t, "the pod killed after its sync", func() bool { return runningContainers(t, rt, pod.UID) == 0 && r.pod(pod.UID) == nil })
}

// The agent's stop still ends a runtime SyncPod in flight: no goroutine
// outlives Run.
func TestStoppingTheAgentCancelsARuntimeSyncInFlight(t *testing.T) {
	pod := newPod("stuck", v1.RestartPolicyAlways, "c")
	rt := newGatedRuntime(t, pod.UID)
	c := fastConfig(rt)
	r := start(t, c)
	r.set(pod)
	<-rt.entered
	r.stop()
	returned, err := rt.result()
	if !returned || err == nil {
		t.Fatalf("after Run returned: SyncPod returned %v with context error %v; want it cancelled", returned, err)
	}
}
