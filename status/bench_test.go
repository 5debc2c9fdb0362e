package status_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/status/statustest"
)

// BenchmarkSetPodStatusAndSync: each op sets a status for every one of N
// pods and syncs them; "change" runs send a real change each time, "noop"
// runs the same status again; "change-update" is "change" with
// Config.UpdateKnownStatus (updates rather than patches; patches/set counts
// both).
func BenchmarkSetPodStatusAndSync(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, mode := range []string{"change", "noop", "change-update"} {
			b.Run(fmt.Sprintf("N=%d/%s", n, mode), func(b *testing.B) {
				benchSync(b, n, mode != "noop", mode == "change-update")
			})
		}
	}
}

func benchSync(b *testing.B, n int, change, update bool) {
	ctx := context.Background()
	f := statustest.New()
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = testPod(fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid%d", i)))
		f.Add(pods[i])
	}
	m, _ := newManager(b, f, func(c *status.Config) { c.UpdateKnownStatus = update })
	sts := [2]v1.PodStatus{runningStatus("cri://a"), runningStatus("cri://a")}
	sts[1].Message = "other"
	for _, p := range pods {
		m.SetPodStatus(p, sts[0])
	}
	m.Sync(ctx)
	f.ClearActions()

	patches := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st := &sts[0]
		if change {
			st = &sts[(i+1)%2]
		}
		for _, p := range pods {
			m.SetPodStatus(p, *st)
		}
		m.Sync(ctx)
		b.StopTimer()
		patches += f.Count(statustest.VerbPatch) + f.Count(statustest.VerbUpdate)
		f.ClearActions()
		b.StartTimer()
	}
	b.ReportMetric(float64(patches)/float64(b.N*n), "patches/set")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/pod")
}

func BenchmarkGeneratePodStatus(b *testing.B) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid1"},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{
			{Name: "app", Image: "app:1"}, {Name: "proxy", Image: "proxy:1", ReadinessProbe: &v1.Probe{}},
		}},
	}
	rs := &runtime.PodStatus{
		ID: pod.UID, IPs: []string{"10.0.0.5"},
		SandboxStatuses: []*runtime.SandboxStatus{{ID: "sb", State: runtime.SandboxStateReady, CreatedAt: t0, IPs: []string{"10.0.0.5"}}},
		ContainerStatuses: []*runtime.ContainerStatus{
			{ID: runtime.ContainerID{Type: "containerd", ID: "a1"}, Name: "app", State: runtime.ContainerStateRunning, CreatedAt: t0, StartedAt: t0, Image: "app:1", ImageID: "sha256:1"},
			{ID: runtime.ContainerID{Type: "containerd", ID: "p1"}, Name: "proxy", State: runtime.ContainerStateRunning, CreatedAt: t0, StartedAt: t0, Image: "proxy:1", ImageID: "sha256:2"},
		},
	}
	opts := status.GenerateOptions{Reasons: status.NewReasonCache(), HostIPs: []string{"192.168.0.1"}}
	old := status.GeneratePodStatus(pod, rs, nil, opts)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = status.GeneratePodStatus(pod, rs, &old, opts)
	}
}
