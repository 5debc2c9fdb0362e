package fake_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nodekit/nodekit/runtime/fake"
)

// GetPods and GetPodStatus are what the PLEG calls on every relist.

func BenchmarkGetPods(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("pods=%d/containers=2", n), func(b *testing.B) {
			rt, _ := newRuntime(b, fake.Config{})
			rt.AddRunningPods(n, 2)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rt.GetPods(ctx, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkGetPodStatus(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("pods=%d/containers=2", n), func(b *testing.B) {
			rt, _ := newRuntime(b, fake.Config{})
			pods := rt.AddRunningPods(n, 2)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p := pods[i%n]
				i++
				if _, err := rt.GetPodStatus(ctx, p.UID, p.Name, p.Namespace); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
