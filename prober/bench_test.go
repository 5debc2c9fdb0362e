//go:build unix

package prober

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

const benchPods = 1000

// benchSetup runs n pods, each with a readiness and a liveness exec probe
// at 1s, on runtime/fake, and returns a manager over their statuses.
func benchSetup(b *testing.B, n int, reg prometheus.Registerer) (*Manager, *fake.Runtime, []*v1.Pod) {
	b.Helper()
	rt, err := fake.New(fake.Config{})
	if err != nil {
		b.Fatal(err)
	}
	st := &fakeStatus{m: map[types.UID]*v1.PodStatus{}}
	ctx := context.Background()
	pods := make([]*v1.Pod, n)
	yes := true
	for i := range pods {
		probe := func(cmd string) *v1.Probe {
			return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{cmd}}},
				PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
		}
		pod := podWith(fmt.Sprintf("u%d", i), v1.Container{Name: "app", Image: "img",
			ReadinessProbe: probe("ready"), LivenessProbe: probe("live")})
		if res := rt.SyncPod(ctx, pod, nil, nil, nil); res.Error() != nil {
			b.Fatal(res.Error())
		}
		rs, err := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			b.Fatal(err)
		}
		cs := rs.ContainerStatuses[0]
		st.set(pod.UID, v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1", ContainerStatuses: []v1.ContainerStatus{{
			Name: "app", ContainerID: cs.ID.String(), Started: &yes,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.StartedAt)}},
		}}})
		pods[i] = pod
	}
	m, err := New(Config{Status: st, Runner: rt, Registerer: reg, Jitter: func(d time.Duration) time.Duration { return 0 }})
	if err != nil {
		b.Fatal(err)
	}
	return m, rt, pods
}

// BenchmarkProbe is one probe execution of nodekit's own work: a worker's
// status lookup, gating, the exec on runtime/fake and the result's
// bookkeeping, among 1,000 pods × 2 probes; with the prober metrics and
// without.
func BenchmarkProbe(b *testing.B) {
	b.Run("metrics", func(b *testing.B) { benchProbe(b, prometheus.NewRegistry()) })
	b.Run("no-metrics", func(b *testing.B) { benchProbe(b, nil) })
}

func benchProbe(b *testing.B, reg prometheus.Registerer) {
	m, _, pods := benchSetup(b, benchPods, reg)
	var ws []*worker
	for _, pod := range pods {
		c := &pod.Spec.Containers[0]
		ws = append(ws, newWorker(m, pod, c, false, Readiness, c.ReadinessProbe), newWorker(m, pod, c, false, Liveness, c.LivenessProbe))
	}
	ctx := context.Background()
	for _, w := range ws { // first probe: new container IDs, initial results
		w.doProbe(ctx)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !ws[i%len(ws)].doProbe(ctx) {
			b.Fatal("worker stopped")
		}
	}
}

// BenchmarkManager1000Pods runs 1,000 pods × 2 exec probes at a 1s period on
// runtime/fake with the real clock; one op is one round of 2,000 probes.
// It reports the CPU time (user+system of the whole process, less what it
// spends idle) and allocations per probe execution, and the goroutines per
// probe.
func BenchmarkManager1000Pods(b *testing.B) {
	m, rt, pods := benchSetup(b, benchPods, nil)
	// The process's CPU while idle (the test binary, the GC, this loop's
	// polling) is not the probes'.
	goruntime.GC()
	idle0 := cpuTime()
	for i := 0; i < 200; i++ {
		_ = rt.CallCount("ExecSync")
		time.Sleep(5 * time.Millisecond)
	}
	idlePerSec := float64(cpuTime()-idle0) / 1.0
	base := goruntime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = m.Run(ctx) })
	wg.Go(func() {
		for {
			select {
			case <-m.Updates():
			case <-ctx.Done():
				return
			}
		}
	})
	for _, pod := range pods {
		m.AddPod(pod)
	}
	probes := 2 * len(pods)
	waitCalls := func(n int) {
		for rt.CallCount("ExecSync") < n {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitCalls(probes) // every worker has probed once
	goroutines := goruntime.NumGoroutine() - base

	var ms0, ms1 goruntime.MemStats
	goruntime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	calls0 := rt.CallCount("ExecSync")
	t0 := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		waitCalls(calls0 + (i+1)*probes)
	}
	b.StopTimer()
	done := rt.CallCount("ExecSync") - calls0
	cpu := float64(cpuTime()-cpu0) - idlePerSec*time.Since(t0).Seconds()
	goruntime.ReadMemStats(&ms1)
	cancel()
	wg.Wait()
	b.ReportMetric(cpu/float64(done), "cpu-ns/probe")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(done), "allocs/probe")
	b.ReportMetric(float64(goroutines)/float64(probes), "goroutines/probe")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var _ runtime.CommandRunner = (*fake.Runtime)(nil)
