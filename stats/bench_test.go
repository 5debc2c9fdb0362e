package stats_test

import (
	"context"
	"testing"
	"time"

	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/stats"
)

// BenchmarkSummary110Pods is one updating summary of a node at the
// kubelet's default pod limit (110 pods of two containers) on the fake
// runtime: the stats package's own cost, without a runtime's RPCs.
func BenchmarkSummary110Pods(b *testing.B) {
	rt, clk := newFake(b)
	rt.SetContainerBehavior("c0", fake.Behavior{Usage: fake.Usage{CPUMilli: 100, MemoryBytes: 64 << 20, DiskBytes: 1 << 20}})
	rt.SetContainerBehavior("c1", fake.Behavior{Usage: fake.Usage{CPUMilli: 10, MemoryBytes: 16 << 20}})
	rt.AddRunningPods(110, 2)
	sp := newProvider(b, stats.Config{Runtime: rt, Clock: clk})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		clk.Step(10 * time.Second)
		s, err := sp.Summary(ctx, true)
		if err != nil || len(s.Pods) != 110 {
			b.Fatalf("summary: %v, %d pods", err, len(s.Pods))
		}
	}
}

// BenchmarkResourceMetrics110Pods is one /metrics/resource scrape of the
// same node.
func BenchmarkResourceMetrics110Pods(b *testing.B) {
	rt, clk := newFake(b)
	rt.AddRunningPods(110, 2)
	sp := newProvider(b, stats.Config{Runtime: rt, Clock: clk})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sp.GetMetricsResource(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
