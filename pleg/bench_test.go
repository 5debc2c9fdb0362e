package pleg

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// staticLister answers from prebuilt listings and statuses without
// allocating, so that the benchmarks below measure the PLEG alone, as a
// benchmark of the kubelet's relist on its FakeRuntime does.
type staticLister struct {
	pods     []*runtime.Pod
	statuses map[types.UID]*runtime.PodStatus
}

func (l *staticLister) GetPods(context.Context, bool) ([]*runtime.Pod, error) { return l.pods, nil }

func (l *staticLister) GetPodStatus(_ context.Context, uid types.UID, _, _ string) (*runtime.PodStatus, error) {
	return l.statuses[uid], nil
}

// benchPods returns n pods of two running containers each, and their
// statuses.
func benchPods(n int) ([]*runtime.Pod, map[types.UID]*runtime.PodStatus) {
	pods := make([]*runtime.Pod, n)
	statuses := make(map[types.UID]*runtime.PodStatus, n)
	for i := range pods {
		uid := types.UID(fmt.Sprintf("pod-%06d", i))
		p := pod(uid, ctr(fmt.Sprintf("%s-a", uid), cRunning), ctr(fmt.Sprintf("%s-b", uid), cRunning))
		pods[i] = p
		statuses[uid] = statusOf(uid, p)
	}
	return pods, statuses
}

func newBenchPLEG(b *testing.B, rt RuntimeLister, n int) *GenericPLEG {
	g, err := New(Config{
		Runtime:              rt,
		Cache:                runtime.NewCache(),
		Clock:                clock.RealClock{}, // what production pays for timers
		Log:                  logr.Discard(),
		EventChannelCapacity: 3 * n, // no drops: every event is paid for
	})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func discard(ch <-chan PodLifecycleEvent) {
	for len(ch) > 0 {
		<-ch
	}
}

var benchSizes = []int{100, 1000, 10000}

// BenchmarkRelist measures one relist of n pods with two containers each:
// the first (every pod new), a steady one (nothing changed) and one with one
// container changed.
func BenchmarkRelist(b *testing.B) {
	ctx := context.Background()
	for _, n := range benchSizes {
		pods, statuses := benchPods(n)
		b.Run(fmt.Sprintf("first/pods=%d", n), func(b *testing.B) {
			rt := &staticLister{pods: pods, statuses: statuses}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				g := newBenchPLEG(b, rt, n)
				b.StartTimer()
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("steady/pods=%d", n), func(b *testing.B) {
			rt := &staticLister{pods: pods, statuses: statuses}
			g := newBenchPLEG(b, rt, n)
			if err := g.Relist(ctx); err != nil {
				b.Fatal(err)
			}
			discard(g.Watch())
			b.ReportAllocs()
			for b.Loop() {
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if len(g.Watch()) != 0 {
				b.Fatal("steady relist sent events")
			}
		})
		b.Run(fmt.Sprintf("oneChanged/pods=%d", n), func(b *testing.B) {
			// Two listings that differ in one container's state; each
			// relist flips between them.
			changed := append([]*runtime.Pod(nil), pods...)
			p := *pods[n/2]
			p.Containers = []*runtime.Container{ctr(string(p.ID)+"-a", cExited), p.Containers[1]}
			changed[n/2] = &p
			rt := &staticLister{pods: pods, statuses: statuses}
			g := newBenchPLEG(b, rt, n)
			if err := g.Relist(ctx); err != nil {
				b.Fatal(err)
			}
			discard(g.Watch())
			listings := [2][]*runtime.Pod{changed, pods}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				rt.pods = listings[i%2]
				i++
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
				if len(g.Watch()) != 1 {
					b.Fatalf("want one event, have %d", len(g.Watch()))
				}
				<-g.Watch()
			}
		})
	}
}

// slowLister is a staticLister whose GetPodStatus takes a fixed time, like a
// runtime under load.
type slowLister struct {
	staticLister
	latency time.Duration
}

func (l *slowLister) GetPodStatus(ctx context.Context, uid types.UID, name, ns string) (*runtime.PodStatus, error) {
	time.Sleep(l.latency)
	return l.staticLister.GetPodStatus(ctx, uid, name, ns)
}

// BenchmarkFirstRelistSlowRuntime shows what parallel inspection buys when
// GetPodStatus takes 1 ms: 100 new pods, inspected one at a time (as the
// kubelet does) or 8 at a time (the default).
func BenchmarkFirstRelistSlowRuntime(b *testing.B) {
	ctx := context.Background()
	pods, statuses := benchPods(100)
	rt := &slowLister{staticLister{pods, statuses}, time.Millisecond}
	for _, par := range []int{1, DefaultInspectParallelism} {
		b.Run(fmt.Sprintf("parallelism=%d", par), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				g, err := New(Config{Runtime: rt, Cache: runtime.NewCache(), InspectParallelism: par})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRelistWithMetrics is BenchmarkRelist's steady case with the
// metrics registered, to compare with it: instrumentation must cost a
// relist nothing measurable.
func BenchmarkRelistWithMetrics(b *testing.B) {
	ctx := context.Background()
	for _, n := range benchSizes {
		pods, statuses := benchPods(n)
		b.Run(fmt.Sprintf("steady/pods=%d", n), func(b *testing.B) {
			g, err := New(Config{
				Runtime: &staticLister{pods: pods, statuses: statuses}, Cache: runtime.NewCache(),
				EventChannelCapacity: 3 * n, Registerer: prometheus.NewRegistry(),
			})
			if err != nil {
				b.Fatal(err)
			}
			if err := g.Relist(ctx); err != nil {
				b.Fatal(err)
			}
			discard(g.Watch())
			b.ReportAllocs()
			for b.Loop() {
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
