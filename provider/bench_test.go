package provider_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/provider/providertest"
)

// BenchmarkPipeline runs 1,000 pods from a SET on a source to Running (in
// the agent's status manager) on an instant pod-level provider, through
// podconfig, syncloop, podworkers, the evented PLEG, status and the
// adapter: with NotifyPods, and polled (the adapter reads the status right
// after CreatePod). One op is the whole 1,000; it also reports the
// provider calls per pod and the wall time to all Running. Compare with
// agent's BenchmarkPipeline/fake (the container-level path).
func BenchmarkPipeline(b *testing.B) {
	const n = 1000
	for _, notify := range []bool{true, false} {
		name := "notify"
		if !notify {
			name = "polled"
		}
		b.Run(fmt.Sprintf("%s/pods=%d", name, n), func(b *testing.B) {
			var calls, wall float64
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				pods := make([]*v1.Pod, n)
				for j := range pods {
					pods[j] = testPod(fmt.Sprintf("r%d-p%04d", i, j))
				}
				p := providertest.New(nil)
				var h provider.PodLifecycleHandler = p
				if notify {
					h = &providertest.Notifier{Provider: p}
				}
				rt, err := provider.New(provider.Config{Provider: h})
				if err != nil {
					b.Fatal(err)
				}
				a, err := agent.New(agent.Config{NodeName: "vk", Runtime: rt, Sources: []string{src}, MaxPods: n,
					RelistPeriod: 100 * time.Millisecond, RuntimeCheckPeriod: 5 * time.Second, SyncFrequency: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				goruntime.GC()
				b.StartTimer()

				start := time.Now()
				go func() { done <- a.Run(ctx) }()
				a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: pods}
				waitAllRunning(b, a, pods)
				wall += time.Since(start).Seconds()

				b.StopTimer()
				for _, m := range []string{"CreatePod", "UpdatePod", "DeletePod", "GetPod", "GetPodStatus", "GetPods"} {
					calls += float64(p.Calls(m))
				}
				cancel()
				<-done
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(calls/float64(b.N*n), "calls/pod")
			b.ReportMetric(wall/float64(b.N), "s-to-running")
		})
	}
}

func waitAllRunning(b *testing.B, a *agent.Agent, pods []*v1.Pod) {
	deadline := time.Now().Add(time.Minute)
	next := 0
	for next < len(pods) {
		st, ok := a.Status().SharedPodStatus(pods[next].UID)
		if ok && st.Phase == v1.PodRunning && len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Running != nil {
			next++
			continue
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d pods running after a minute", next, len(pods))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
