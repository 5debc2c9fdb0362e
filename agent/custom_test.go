package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podmanager"
	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/syncloop"
)

// custom is a node agent assembled by hand from exported parts, no code
// copied from package agent: the sync loop's Handler and the PodSyncer.
type custom struct {
	rt      runtime.Runtime
	pods    *podmanager.Manager
	workers *podworkers.PodWorkers
	status  *status.Manager
	admit   []admission.PodAdmitHandler
}

func (c *custom) update(t podworkers.UpdateType, pods []*v1.Pod) {
	for _, p := range pods {
		if t == podworkers.SyncPodCreate {
			if r := admission.Admit(c.admit, &admission.PodAdmitAttributes{Pod: p, OtherPods: c.pods.Pods()}); !r.Admit {
				c.status.SetPodStatus(p, v1.PodStatus{Phase: v1.PodFailed, Reason: r.Reason, Message: r.Message})
				continue
			}
		}
		c.pods.AddOrUpdate(p)
		_ = c.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: t, Pod: p, KillPodOptions: &podworkers.KillPodOptions{}})
	}
}
func (c *custom) HandlePodAdditions(_ context.Context, ps []*v1.Pod) {
	c.update(podworkers.SyncPodCreate, ps)
}
func (c *custom) HandlePodUpdates(_ context.Context, ps []*v1.Pod) {
	c.update(podworkers.SyncPodUpdate, ps)
}
func (c *custom) HandlePodSyncs(_ context.Context, ps []*v1.Pod) {
	c.update(podworkers.SyncPodSync, ps)
}
func (c *custom) HandlePodRemoves(_ context.Context, ps []*v1.Pod) {
	c.update(podworkers.SyncPodKill, ps)
}
func (c *custom) HandlePodReconcile(context.Context, []*v1.Pod) {}
func (c *custom) HandlePodCleanups(context.Context) error {
	c.workers.SyncKnownPods(c.pods.Pods())
	return nil
}

func (c *custom) SyncPod(ctx context.Context, _ podworkers.UpdateType, pod, _ *v1.Pod, rs *runtime.PodStatus) (bool, error) {
	st := status.GeneratePodStatus(pod, rs, nil, status.GenerateOptions{})
	c.status.SetPodStatus(pod, st)
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
		return true, nil
	}
	return false, c.rt.SyncPod(ctx, pod, rs, nil, nil).Error()
}
func (c *custom) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, rs *runtime.PodStatus, grace *int64, _ func(*v1.PodStatus)) error {
	rp := rs.RunningPod(c.rt.Type())
	rp.ID, rp.Name, rp.Namespace = pod.UID, pod.Name, pod.Namespace // the cache's status may lack them
	if err := c.rt.KillPod(ctx, pod, rp, grace); err != nil {
		return err
	}
	if after, err := c.rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err != nil || len(after.RunningContainerStatuses()) > 0 {
		return fmt.Errorf("still running after kill: %v", err)
	}
	return nil
}
func (c *custom) SyncTerminatingRuntimePod(ctx context.Context, rp *runtime.Pod) error {
	return c.rt.KillPod(ctx, nil, *rp, nil)
}
func (c *custom) SyncTerminatedPod(_ context.Context, pod *v1.Pod, _ *runtime.PodStatus) error {
	c.status.TerminatePod(pod)
	return nil
}

// The custom agent runs the older pod and rejects the newer with MaxPods 1.
func TestCustomAgentFromExportedParts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rt, _ := fake.New(fake.Config{})
	cache, queue := runtime.NewCache(), podworkers.NewQueue(nil)
	c := &custom{rt: rt, pods: podmanager.New(), admit: []admission.PodAdmitHandler{admission.MaxPods(1)}}
	c.status, _ = status.NewManager(status.Config{})
	c.workers, _ = podworkers.New(podworkers.Config{Syncer: c, Cache: cache, ResyncQueue: queue})
	p, _ := pleg.New(pleg.Config{Runtime: rt, Cache: cache, RelistPeriod: 20 * time.Millisecond})
	cfg, _ := podconfig.NewPodConfig(podconfig.Incremental, podconfig.Options{})
	loop, _ := syncloop.New(syncloop.Config{Source: cfg, Pods: c.pods, PLEG: p.Watch(), DuePods: queue})
	done := make(chan struct{}, 3)
	for _, run := range []func(context.Context) error{p.Run, c.workers.Run, func(ctx context.Context) error { return loop.Run(ctx, cfg.Updates(), c) }} {
		go func() { _ = run(ctx); done <- struct{}{} }()
	}
	defer func() { cancel(); <-done; <-done; <-done }()

	pod := func(name string, age time.Duration) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("custom-" + name),
			CreationTimestamp: metav1.NewTime(time.Now().Add(-age))}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	}
	web, extra := pod("web", time.Hour), pod("extra", 0)
	cfg.Channel(ctx, "api") <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{web, extra}}
	require.Eventually(t, func() bool {
		st, _ := c.status.GetPodStatus(web.UID)
		rej, _ := c.status.GetPodStatus(extra.UID)
		return st.Phase == v1.PodRunning && rej.Phase == v1.PodFailed && rej.Reason == admission.ReasonOutOfPods
	}, 10*time.Second, 10*time.Millisecond, "web Running, extra rejected with OutOfpods")
}
