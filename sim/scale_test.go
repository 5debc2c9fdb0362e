package sim_test

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/sim"
)

var (
	scaleNodes = flag.Int("sim.nodes", 100, "nodes of BenchmarkScale (1000 for the issue's figure)")
	scalePods  = flag.Int("sim.pods", 110, "pods per node of BenchmarkScale")
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// BenchmarkScale brings -sim.nodes nodes with -sim.pods pods each to
// Running and measures: real seconds to all Running, memory (heap and
// stacks) per node and per pod, goroutines per pod, and CPU per virtual
// minute at steady state. go test -run '^$' -bench Scale -benchtime 1x
// ./sim -sim.nodes 1000; skipped with -short.
func BenchmarkScale(b *testing.B) {
	if testing.Short() {
		b.Skip("scale benchmark skipped with -short")
	}
	nodes, perNode := *scaleNodes, *scalePods
	for range b.N {
		ctx := context.Background()
		base, g0 := heapInUse(), runtime.NumGoroutine()
		cl, err := sim.New(sim.Config{NoEventLog: true, IdleTimeout: 5 * time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i := range nodes {
			if _, err := cl.AddNode(fmt.Sprintf("node-%04d", i)); err != nil {
				b.Fatal(err)
			}
		}
		if err := cl.RunFor(ctx, time.Second); err != nil {
			b.Fatal(err)
		}
		nodesUp := time.Since(start)
		withNodes, gNodes := heapInUse(), runtime.NumGoroutine()
		start = time.Now()
		pods := cl.Pods("default")
		for i := range nodes {
			for j := range perNode {
				_, err := pods.Create(ctx, &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%04d-%03d", i, j)},
					Spec: v1.PodSpec{NodeName: fmt.Sprintf("node-%04d", i),
						Containers: []v1.Container{{Name: "app", Image: "app:1"}}},
				}, metav1.CreateOptions{})
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		want := nodes * perNode
		running := func() int {
			l, _ := cl.Store().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
			return len(l.Items)
		}
		virtStart, steps0 := cl.Clock().Now(), cl.Steps()
		if err := cl.RunUntil(ctx, 10*time.Minute, func() bool { return running() == want }); err != nil {
			b.Fatalf("%v: %d of %d running", err, running(), want)
		}
		toRunning := time.Since(start)
		virtToRunning := cl.Clock().Since(virtStart)
		stepsToRunning := cl.Steps() - steps0
		withPods, gPods := heapInUse(), runtime.NumGoroutine()
		// Steady state: a virtual minute (relists, resyncs, leases).
		if err := cl.RunFor(ctx, time.Minute); err != nil {
			b.Fatal(err)
		}
		c0, r0, steps0 := cpuTime(), time.Now(), cl.Steps()
		if err := cl.RunFor(ctx, time.Minute); err != nil {
			b.Fatal(err)
		}
		cpuPerMin, realPerMin, stepsPerMin := cpuTime()-c0, time.Since(r0), cl.Steps()-steps0
		cl.Close()

		b.ReportMetric(nodesUp.Seconds(), "s-nodes-up")
		b.ReportMetric(toRunning.Seconds(), "s-to-running")
		b.ReportMetric(virtToRunning.Seconds(), "virtual-s-to-running")
		b.ReportMetric(float64(withNodes-base)/float64(nodes)/1024, "KiB/node")
		b.ReportMetric(float64(withPods-withNodes)/float64(want)/1024, "KiB/pod")
		b.ReportMetric(float64(gNodes-g0)/float64(nodes), "goroutines/node")
		b.ReportMetric(float64(gPods-gNodes)/float64(want), "goroutines/pod")
		b.ReportMetric(cpuPerMin.Seconds(), "cpu-s/virtual-min")
		b.ReportMetric(realPerMin.Seconds(), "s/virtual-min")
		b.ReportMetric(float64(stepsToRunning), "steps-to-running")
		b.ReportMetric(float64(stepsPerMin), "steps/virtual-min")
	}
}
