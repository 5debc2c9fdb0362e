package podconfig

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podutil"
)

// baselineStorage re-implements, for comparison only, the kubelet's
// podStorage merge of a SET (pkg/kubelet/config/config.go): a fresh map per
// SET, a set of full names for duplicates, reflect.DeepEqual on spec,
// labels, deletion fields and status, and a deep copy of every reported pod.
// It lets the benchmarks compare both algorithms on the same pods and
// machine.
type baselineStorage struct {
	pods map[types.UID]*v1.Pod
}

func (s *baselineStorage) set(source string, incoming []*v1.Pod) (adds, updates, removes, reconciles []*v1.Pod) {
	old := s.pods
	pods := make(map[types.UID]*v1.Pod)
	names := map[string]struct{}{}
	for _, ref := range incoming {
		name := podutil.FullName(ref)
		if _, dup := names[name]; dup {
			continue
		}
		names[name] = struct{}{}
		if ref.Annotations == nil {
			ref.Annotations = map[string]string{}
		}
		ref.Annotations[podutil.ConfigSourceAnnotationKey] = source
		if existing, ok := old[ref.UID]; ok {
			pods[ref.UID] = existing
			if reflect.DeepEqual(existing.Spec, ref.Spec) && reflect.DeepEqual(existing.Labels, ref.Labels) &&
				reflect.DeepEqual(existing.DeletionTimestamp, ref.DeletionTimestamp) &&
				reflect.DeepEqual(existing.DeletionGracePeriodSeconds, ref.DeletionGracePeriodSeconds) &&
				baselineAnnotationsEqual(existing.Annotations, ref.Annotations) {
				if !reflect.DeepEqual(existing.Status, ref.Status) {
					existing.Status = ref.Status
					reconciles = append(reconciles, existing)
				}
				continue
			}
			existing.Spec, existing.Labels, existing.Status = ref.Spec, ref.Labels, ref.Status
			updates = append(updates, existing)
			continue
		}
		ref.Annotations[podutil.ConfigFirstSeenAnnotationKey] = time.Now().Format(time.RFC3339Nano)
		pods[ref.UID] = ref
		adds = append(adds, ref)
	}
	for uid, p := range old {
		if _, ok := pods[uid]; !ok {
			removes = append(removes, p)
		}
	}
	s.pods = pods
	return baselineCopy(adds), baselineCopy(updates), baselineCopy(removes), baselineCopy(reconciles)
}

func baselineAnnotationsEqual(a, b map[string]string) bool {
	for k, v := range b {
		if isLocalAnnotation(k) {
			continue
		}
		if av, ok := a[k]; !ok || av != v {
			return false
		}
	}
	for k := range a {
		if isLocalAnnotation(k) {
			continue
		}
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func baselineCopy(pods []*v1.Pod) []*v1.Pod {
	out := []*v1.Pod{}
	for _, p := range pods {
		out = append(out, p.DeepCopy())
	}
	return out
}

// BenchmarkBaselineKubeletSet: the kubelet's algorithm on BenchmarkSet's work.
func BenchmarkBaselineKubeletSet(b *testing.B) {
	for _, shape := range shapes {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/N=%d", shape, n), func(b *testing.B) {
				b.ReportAllocs()
				var cpu time.Duration
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					s := &baselineStorage{}
					pods := shapedPods(shape, n, -1, "")
					runtime.GC()
					b.StartTimer()
					c0 := cpuNow()
					if adds, _, _, _ := s.set("api", pods); len(adds) != n {
						b.Fatal(len(adds))
					}
					cpu += cpuNow() - c0
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkBaselineKubeletSetOneChanged: the kubelet's algorithm on
// BenchmarkSetOneChanged's work.
func BenchmarkBaselineKubeletSetOneChanged(b *testing.B) {
	for _, shape := range shapes {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/N=%d", shape, n), func(b *testing.B) {
				s := &baselineStorage{}
				s.set("api", shapedPods(shape, n, -1, ""))
				b.ReportAllocs()
				b.ResetTimer()
				var cpu time.Duration
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					pods := shapedPods(shape, n, n/2, fmt.Sprintf("registry.example.com/web:2.%d", i))
					runtime.GC()
					b.StartTimer()
					c0 := cpuNow()
					if _, updates, _, _ := s.set("api", pods); len(updates) != 1 {
						b.Fatal(len(updates))
					}
					cpu += cpuNow() - c0
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
