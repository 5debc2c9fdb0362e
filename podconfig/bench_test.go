package podconfig

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podconfig/podconfigtest"
)

// minimalPod is the kubelet config tests' pod: one container, no
// resources, no status.
func minimalPod(i int, image string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i))},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, DNSPolicy: v1.DNSClusterFirst,
			Containers: []v1.Container{{Name: "ctr", Image: image, ImagePullPolicy: v1.PullIfNotPresent, TerminationMessagePolicy: v1.TerminationMessageReadFile}}},
	}
}

// shape selects the pods the benchmarks use: "workload" (podconfigtest.WorkloadPod) or
// "minimal" (minimalPod).
var shapes = []string{"workload", "minimal"}

func benchPods(n int, changed int, image string) []*v1.Pod {
	return shapedPods("workload", n, changed, image)
}

func shapedPods(shape string, n int, changed int, image string) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		img := "registry.example.com/web:1.0"
		if i == changed {
			img = image
		}
		if shape == "minimal" {
			pods[i] = minimalPod(i, img)
		} else {
			pods[i] = podconfigtest.WorkloadPod(i, img)
		}
	}
	return pods
}

var benchSizes = []int{100, 1000, 10000}

// BenchmarkSet measures a source's first SET of N pods through the mux: merge
// into empty storage and delivery of the ADD to the consumer.
// Building the incoming pods is excluded.
func BenchmarkSet(b *testing.B) {
	for _, shape := range shapes {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/N=%d", shape, n), func(b *testing.B) {
				b.ReportAllocs()
				var cpu time.Duration
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					ctx, cancel := context.WithCancel(context.Background())
					c, _ := NewPodConfig(Incremental, Options{})
					ch := c.Channel(ctx, "api")
					pods := shapedPods(shape, n, -1, "")
					runtime.GC() // collect the setup's garbage outside the timing
					b.StartTimer()
					c0 := cpuNow()
					ch <- PodUpdate{Op: SET, Pods: pods}
					if u := <-c.Updates(); u.Op != ADD || len(u.Pods) != n {
						b.Fatalf("got %v with %d pods", u.Op, len(u.Pods))
					}
					cpu += cpuNow() - c0
					b.StopTimer()
					cancel()
					b.StartTimer()
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkSetOneChanged measures a SET of N pods of which one changed its
// image since the previous SET: N fingerprints and one UPDATE delivered.
// Building the incoming pods is excluded.
func BenchmarkSetOneChanged(b *testing.B) {
	for _, shape := range shapes {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/N=%d", shape, n), func(b *testing.B) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				c, _ := NewPodConfig(Incremental, Options{})
				ch := c.Channel(ctx, "api")
				ch <- PodUpdate{Op: SET, Pods: shapedPods(shape, n, -1, "")}
				<-c.Updates()
				// Unchanged: takes the stored pods' fingerprints (at their
				// first comparison), so the timed SETs are the steady state;
				// Sync waits for it.
				ch <- PodUpdate{Op: SET, Pods: shapedPods(shape, n, -1, "")}
				if err := c.Sync(ctx); err != nil {
					b.Fatal(err)
				}
				<-c.Updates()
				b.ReportAllocs()
				b.ResetTimer()
				var cpu time.Duration
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					pods := shapedPods(shape, n, n/2, fmt.Sprintf("registry.example.com/web:2.%d", i))
					runtime.GC()
					b.StartTimer()
					c0 := cpuNow()
					ch <- PodUpdate{Op: SET, Pods: pods}
					if u := <-c.Updates(); u.Op != UPDATE || len(u.Pods) != 1 {
						b.Fatalf("got %v with %d pods", u.Op, len(u.Pods))
					}
					cpu += cpuNow() - c0
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkUpdateOne measures one incremental UPDATE (the apiserver source's
// path for a watch event) with N pods stored.
func BenchmarkUpdateOne(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c, _ := NewPodConfig(Incremental, Options{})
			ch := c.Channel(ctx, "api")
			ch <- PodUpdate{Op: SET, Pods: benchPods(n, -1, "")}
			<-c.Updates()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				pod := podconfigtest.WorkloadPod(n/2, fmt.Sprintf("registry.example.com/web:2.%d", i))
				b.StartTimer()
				ch <- PodUpdate{Op: UPDATE, Pods: []*v1.Pod{pod}}
				if u := <-c.Updates(); u.Op != UPDATE || len(u.Pods) != 1 {
					b.Fatalf("got %v with %d pods", u.Op, len(u.Pods))
				}
			}
		})
	}
}
