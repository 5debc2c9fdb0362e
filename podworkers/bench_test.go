package podworkers_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/runtime"
)

// nopSyncer counts SyncPod calls and signals when n were made.
type nopSyncer struct {
	n     int64
	count atomic.Int64
	done  chan struct{}
}

func (s *nopSyncer) SyncPod(context.Context, podworkers.UpdateType, *v1.Pod, *v1.Pod, *runtime.PodStatus) (bool, error) {
	if s.count.Add(1) == s.n {
		close(s.done)
	}
	return false, nil
}
func (s *nopSyncer) SyncTerminatingPod(context.Context, *v1.Pod, *runtime.PodStatus, *int64, func(*v1.PodStatus)) error {
	return nil
}
func (s *nopSyncer) SyncTerminatingRuntimePod(context.Context, *runtime.Pod) error { return nil }
func (s *nopSyncer) SyncTerminatedPod(context.Context, *v1.Pod, *runtime.PodStatus) error {
	return nil
}

// readyCache answers every GetNewerThan at once with one shared status, so
// the benchmark measures the workers, not the cache.
type readyCache struct{ runtime.Cache }

var readyStatus = &runtime.PodStatus{}

func (readyCache) GetNewerThan(context.Context, types.UID, time.Time) (*runtime.PodStatus, error) {
	return readyStatus, nil
}
func (readyCache) Get(types.UID) (*runtime.PodStatus, error) { return readyStatus, nil }

// discardQueue drops requeues.
type discardQueue struct{}

func (discardQueue) Enqueue(types.UID, time.Duration) {}

// BenchmarkUpdatePodRound measures one round: N new pods handed to
// UpdatePod, until each has been synced once with a no-op syncer. Per-pod
// figures are reported as ns/pod and B/pod.
func BenchmarkUpdatePodRound(b *testing.B) {
	benchmarkUpdatePodRound(b, false)
}

// BenchmarkUpdatePodRoundWithMetrics is BenchmarkUpdatePodRound with the
// pod worker metrics registered: one observation per sync.
func BenchmarkUpdatePodRoundWithMetrics(b *testing.B) {
	benchmarkUpdatePodRound(b, true)
}

func benchmarkUpdatePodRound(b *testing.B, metrics bool) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run("N="+strconv.Itoa(n), func(b *testing.B) {
			pods := make([]*v1.Pod, n)
			for i := range pods {
				pods[i] = newNamedPod("uid-"+strconv.Itoa(i), "ns", "pod-"+strconv.Itoa(i), false)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := &nopSyncer{n: int64(n), done: make(chan struct{})}
				c := podworkers.Config{Syncer: s, Cache: readyCache{}, ResyncQueue: discardQueue{}}
				if metrics {
					c.Registerer = prometheus.NewRegistry()
				}
				p, err := podworkers.New(c)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				ran := make(chan struct{})
				go func() { _ = p.Run(ctx); close(ran) }()
				for _, pod := range pods {
					if err := p.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod}); err != nil {
						b.Fatal(err)
					}
				}
				<-s.done
				cancel()
				<-ran
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/pod")
		})
	}
}
