package agent

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/runtime/fake"
)

// BenchmarkProbeResultToReady runs 1,000 pods, each with a readiness and a
// liveness exec probe at a 1s period, on runtime/fake with the real clock.
// Readiness fails until, in each op, one pod's probe is made to pass and
// triggered: one op is the latency from that probe to the pod's Ready
// condition in the status manager (the probe itself, the results' updates
// stream, the agent applying it). It also reports the goroutines per probe
// (the whole agent's, less its goroutines without probes).
func BenchmarkProbeResultToReady(b *testing.B) {
	const n = 1000
	rt, err := fake.New(fake.Config{Images: []string{benchImage}})
	if err != nil {
		b.Fatal(err)
	}
	c := benchConfig(rt, n)
	c.RelistPeriod = time.Second // the kubelet's; the relists are not what is measured
	a, err := New(c)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	pods := benchPods(0, n)
	names := make([]string, n)
	for i, p := range pods {
		c := &p.Spec.Containers[0]
		c.Name = fmt.Sprintf("app-%04d", i)
		names[i] = c.Name
		rt.SetExecResult(c.Name, []string{"ready"}, fake.ExecResult{ExitCode: 1})
		probe := func(cmd string) *v1.Probe {
			return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{cmd}}},
				PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
		}
		c.ReadinessProbe, c.LivenessProbe = probe("ready"), probe("live")
	}
	base := goruntime.NumGoroutine()
	a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: pods}
	waitAllRunning(b, a, pods)
	for a.Prober().Workers() < 2*n {
		time.Sleep(5 * time.Millisecond)
	}
	goroutines := goruntime.NumGoroutine() - base // idle pod workers hold none

	ready := func(p *v1.Pod) (bool, string) {
		st, _ := a.status.SharedPodStatus(p.UID)
		for _, c := range st.Conditions {
			if c.Type == v1.PodReady {
				return c.Status == v1.ConditionTrue, st.ContainerStatuses[0].ContainerID
			}
		}
		return false, st.ContainerStatuses[0].ContainerID
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, name := pods[i%n], names[i%n]
		if i >= n { // reused: make it unready again first
			b.StopTimer()
			rt.SetExecResult(name, []string{"ready"}, fake.ExecResult{ExitCode: 1})
			for ok, _ := ready(p); ok; ok, _ = ready(p) {
				time.Sleep(10 * time.Millisecond)
			}
			b.StartTimer()
		}
		rt.SetExecResult(name, []string{"ready"}, fake.ExecResult{})
		_, cid := ready(p)
		a.Prober().Ready(p.UID, name, cid) // not ready: probes now
		deadline := time.Now().Add(10 * time.Second)
		for ok, _ := ready(p); !ok; ok, _ = ready(p) {
			if time.Now().After(deadline) {
				b.Fatalf("pod %s not ready 10s after its probe passed", p.Name)
			}
			goruntime.Gosched()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(goroutines)/float64(2*n), "goroutines/probe")
}
