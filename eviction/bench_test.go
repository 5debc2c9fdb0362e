package eviction_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nodekit/nodekit/eviction"
)

// BenchmarkSynchronize is one pass over 110 pods (the kubelet's max-pods)
// with the default thresholds plus a soft one: under memory pressure
// (observe, rank, evict one) and without (observe only).
func BenchmarkSynchronize(b *testing.B) {
	specs := make([]podSpec, 110)
	for i := range specs {
		specs[i] = podSpec{name: fmt.Sprintf("p%03d", i), priority: int32(i % 3), memReq: "64Mi", memUsed: uint64(i) * mi, rootfs: uint64(i) * mi, procs: uint64(i)}
	}
	for _, tc := range []struct {
		name  string
		avail uint64
	}{{"pressure", 50 * mi}, {"no-pressure", 4 * gi}} {
		b.Run(tc.name, func(b *testing.B) {
			ts := append(eviction.DefaultThresholds(), thresholds(b, "", "memory.available<1Gi", "memory.available=1m", "")...)
			e := newEnv(b, eviction.Config{Thresholds: ts}, specs...)
			e.node.memAvail, e.node.memWS = tc.avail, 8*gi-tc.avail
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := e.m.Synchronize(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
