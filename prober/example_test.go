package prober_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/prober"
	"github.com/nodekit/nodekit/runtime/fake"
)

// statuses is a StatusProvider; in an agent it is the status manager.
type statuses map[types.UID]*v1.PodStatus

func (s statuses) SharedPodStatus(uid types.UID) (*v1.PodStatus, bool) {
	st, ok := s[uid]
	return st, ok
}

// A pod's readiness probe runs in its container on runtime/fake; its
// verdicts arrive on the updates stream (Failure, the initial value of a
// new container, may be overtaken by Success before it is read: updates
// coalesce).
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	rt, _ := fake.New(fake.Config{})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "app:1", ReadinessProbe: &v1.Probe{
			ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/ready"}}}}}}}}
	rt.SyncPod(ctx, pod, nil, nil, nil) // the container runs
	rs, _ := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	started := true
	st := statuses{pod.UID: {Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
		Name: "app", ContainerID: rs.ContainerStatuses[0].ID.String(), Started: &started,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}}

	m, _ := prober.New(prober.Config{Status: st, Runner: rt, Jitter: func(time.Duration) time.Duration { return 0 }})
	var wg sync.WaitGroup
	wg.Go(func() { _ = m.Run(ctx) })
	m.AddPod(pod)
	for u := range m.Updates() {
		if u.Result == prober.Success {
			fmt.Println(u.Type, u.Result, u.PodUID)
			break
		}
	}
	cancel()
	wg.Wait()
	// Output:
	// Readiness Success uid-web
}
