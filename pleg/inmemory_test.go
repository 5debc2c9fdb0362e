package pleg_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

// onFake is a PLEG relisting the in-memory runtime, both on one fake clock.
type onFake struct {
	rt    *fake.Runtime
	clk   *clocktesting.FakeClock
	cache runtime.Cache
	p     *pleg.GenericPLEG
}

const inspectTimeout = 10 * time.Second

func newOnFake(t *testing.T) *onFake {
	t.Helper()
	f := &onFake{clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), cache: runtime.NewCache()}
	var err error
	f.rt, err = fake.New(fake.Config{Clock: f.clk})
	require.NoError(t, err)
	f.p, err = pleg.New(pleg.Config{Runtime: f.rt, Cache: f.cache, Clock: f.clk, InspectTimeout: inspectTimeout})
	require.NoError(t, err)
	return f
}

// listed returns the IDs of the pod's listed containers and sandboxes by
// name ("" for sandboxes, newest last).
func (f *onFake) listed(t *testing.T, uid types.UID) map[string]string {
	t.Helper()
	pods, err := f.rt.GetPods(context.Background(), true)
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range pods {
		if p.ID != uid {
			continue
		}
		for _, c := range p.Containers {
			out[c.Name] = c.ID.String()
		}
		for _, s := range p.Sandboxes {
			out[""] = s.ID.String()
		}
	}
	return out
}

func (f *onFake) relist(t *testing.T) []pleg.PodLifecycleEvent {
	t.Helper()
	require.NoError(t, f.p.Relist(context.Background()))
	var out []pleg.PodLifecycleEvent
	for len(f.p.Watch()) > 0 {
		out = append(out, <-f.p.Watch())
	}
	checkMore(t, out)
	for i := range out {
		out[i].More = false
	}
	sortEvents(out)
	return out
}

// checkMore checks that one relist's events (in the order sent) come pod
// by pod, each pod's last without More and the others with it.
func checkMore(t *testing.T, es []pleg.PodLifecycleEvent) {
	t.Helper()
	done := map[types.UID]bool{}
	for i, e := range es {
		require.False(t, done[e.ID], "event %d %+v: its pod's events ended before", i, e)
		last := i == len(es)-1 || es[i+1].ID != e.ID
		require.Equal(t, !last, e.More, "event %d %+v", i, e)
		done[e.ID] = last
	}
}

func sortEvents(es []pleg.PodLifecycleEvent) {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].ID != es[j].ID {
			return es[i].ID < es[j].ID
		}
		if es[i].ContainerID != es[j].ContainerID {
			return es[i].ContainerID < es[j].ContainerID
		}
		return es[i].Type < es[j].Type
	})
}

func want(es ...pleg.PodLifecycleEvent) []pleg.PodLifecycleEvent {
	sortEvents(es)
	return es
}

func TestOnInMemoryRuntime(t *testing.T) {
	ctx := context.Background()
	f := newOnFake(t)
	specs := f.rt.AddRunningPods(2, 2)
	a, b := specs[0].UID, specs[1].UID
	idsA, idsB := f.listed(t, a), f.listed(t, b)

	t.Run("first relist reports every container and sandbox started", func(t *testing.T) {
		var w []pleg.PodLifecycleEvent
		for uid, ids := range map[types.UID]map[string]string{a: idsA, b: idsB} {
			for _, id := range ids {
				w = append(w, pleg.PodLifecycleEvent{ID: uid, Type: pleg.ContainerStarted, ContainerID: id})
			}
		}
		assert.Equal(t, want(w...), f.relist(t))
		s, err := f.cache.Get(b)
		require.NoError(t, err)
		assert.NotEmpty(t, s.IPs)
		assert.Len(t, s.ContainerStatuses, 2)
	})

	t.Run("crashed container is reported dead with its exit in the cache", func(t *testing.T) {
		require.NoError(t, f.rt.ExitContainer(a, "c0", 137, "OOMKilled"))
		assert.Equal(t, want(pleg.PodLifecycleEvent{ID: a, Type: pleg.ContainerDied, ContainerID: idsA["c0"]}), f.relist(t))
		s, err := f.cache.Get(a)
		require.NoError(t, err)
		c := s.FindContainerStatusByName("c0")
		require.NotNil(t, c)
		assert.Equal(t, runtime.ContainerStateExited, c.State)
		assert.Equal(t, 137, c.ExitCode)
		assert.Equal(t, "OOMKilled", c.Reason)
	})

	t.Run("stopped sandbox kills the pod and its IPs are kept", func(t *testing.T) {
		before, _ := f.cache.Get(b)
		require.NoError(t, f.rt.StopSandbox(b))
		assert.Equal(t, want(
			pleg.PodLifecycleEvent{ID: b, Type: pleg.ContainerDied, ContainerID: idsB[""]},
			pleg.PodLifecycleEvent{ID: b, Type: pleg.ContainerDied, ContainerID: idsB["c0"]},
			pleg.PodLifecycleEvent{ID: b, Type: pleg.ContainerDied, ContainerID: idsB["c1"]},
		), f.relist(t))
		now, _ := f.rt.GetPodStatus(ctx, b, specs[1].Name, specs[1].Namespace)
		require.Empty(t, now.IPs, "the runtime no longer reports IPs")
		s, _ := f.cache.Get(b)
		assert.Equal(t, before.IPs, s.IPs, "the cache keeps them")
	})

	t.Run("removed pod is reported and deleted from the cache", func(t *testing.T) {
		f.rt.RemovePod(a)
		assert.Equal(t, want(
			pleg.PodLifecycleEvent{ID: a, Type: pleg.ContainerRemoved, ContainerID: idsA["c0"]},
			pleg.PodLifecycleEvent{ID: a, Type: pleg.ContainerDied, ContainerID: idsA["c1"]},
			pleg.PodLifecycleEvent{ID: a, Type: pleg.ContainerRemoved, ContainerID: idsA["c1"]},
			pleg.PodLifecycleEvent{ID: a, Type: pleg.ContainerDied, ContainerID: idsA[""]},
			pleg.PodLifecycleEvent{ID: a, Type: pleg.ContainerRemoved, ContainerID: idsA[""]},
		), f.relist(t))
		s, err := f.cache.Get(a)
		require.NoError(t, err)
		assert.Empty(t, s.ContainerStatuses)
	})

	c := &v1.Pod{}
	c.Name, c.Namespace, c.UID = "web", "default", "uid-web"
	c.Spec.Containers = []v1.Container{{Name: "app", Image: "app:1"}}
	t.Run("pod synced on the runtime is reported started", func(t *testing.T) {
		res := f.rt.SyncPod(ctx, c, nil, nil, nil)
		require.NoError(t, res.Error())
		ids := f.listed(t, c.UID)
		assert.Equal(t, want(
			pleg.PodLifecycleEvent{ID: c.UID, Type: pleg.ContainerStarted, ContainerID: ids[""]},
			pleg.PodLifecycleEvent{ID: c.UID, Type: pleg.ContainerStarted, ContainerID: ids["app"]},
		), f.relist(t))
	})

	t.Run("failing inspection gives no events until it succeeds", func(t *testing.T) {
		require.NoError(t, f.rt.SetFailureRate("GetPodStatus", 1))
		require.NoError(t, f.rt.ExitContainer(c.UID, "app", 1, ""))
		assert.Empty(t, f.relist(t))
		_, err := f.cache.Get(c.UID)
		assert.ErrorIs(t, err, fake.ErrInjected)
		require.NoError(t, f.rt.SetFailureRate("GetPodStatus", 0))
		assert.Equal(t, want(pleg.PodLifecycleEvent{ID: c.UID, Type: pleg.ContainerDied, ContainerID: f.listed(t, c.UID)["app"]}), f.relist(t))
		_, err = f.cache.Get(c.UID)
		assert.NoError(t, err)
	})

	t.Run("slow runtime is cut off by the inspection timeout and inspected again", func(t *testing.T) {
		res := f.rt.SyncPod(ctx, c, nil, nil, nil) // restarts app
		require.NoError(t, res.Error())
		require.NoError(t, f.rt.SetLatency("GetPodStatus", time.Hour))
		done := make(chan error, 1)
		go func() { done <- f.p.Relist(ctx) }()
		// The inspection's timeout and the runtime's latency both wait on
		// the clock; step once both are armed.
		require.Eventually(t, func() bool { return f.clk.Waiters() >= 2 }, 30*time.Second, time.Millisecond)
		f.clk.Step(inspectTimeout)
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			require.FailNow(t, "relist did not end at the inspection timeout")
		}
		assert.Empty(t, f.p.Watch())
		_, err := f.cache.Get(c.UID)
		assert.ErrorIs(t, err, pleg.ErrInspectionTimeout)

		require.NoError(t, f.rt.SetLatency("GetPodStatus", 0))
		got := f.relist(t)
		require.Len(t, got, 1)
		assert.Equal(t, pleg.ContainerStarted, got[0].Type)
	})
}

// BenchmarkRelistInMemoryRuntime is BenchmarkRelist on runtime/fake: the
// figures include the fake's GetPods copy and GetPodStatus.
func BenchmarkRelistInMemoryRuntime(b *testing.B) {
	ctx := context.Background()
	newPLEG := func(b *testing.B, rt *fake.Runtime, n int) *pleg.GenericPLEG {
		p, err := pleg.New(pleg.Config{Runtime: rt, Cache: runtime.NewCache(), Clock: clock.RealClock{}, EventChannelCapacity: 3 * n})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	drain := func(p *pleg.GenericPLEG) {
		for len(p.Watch()) > 0 {
			<-p.Watch()
		}
	}
	seed := func(b *testing.B, n int) (*fake.Runtime, []*v1.Pod) {
		rt, err := fake.New(fake.Config{})
		if err != nil {
			b.Fatal(err)
		}
		return rt, rt.AddRunningPods(n, 2)
	}
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("first/pods=%d", n), func(b *testing.B) {
			rt, _ := seed(b, n)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				p := newPLEG(b, rt, n)
				b.StartTimer()
				if err := p.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("steady/pods=%d", n), func(b *testing.B) {
			rt, _ := seed(b, n)
			p := newPLEG(b, rt, n)
			if err := p.Relist(ctx); err != nil {
				b.Fatal(err)
			}
			drain(p)
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("oneChanged/pods=%d", n), func(b *testing.B) {
			// Each relist follows one container exit (ExitContainer is in
			// the timing); after n exits the runtime is seeded afresh.
			var rt *fake.Runtime
			var pods []*v1.Pod
			var p *pleg.GenericPLEG
			i := n
			b.ReportAllocs()
			for b.Loop() {
				if i == n {
					b.StopTimer()
					rt, pods = seed(b, n)
					p = newPLEG(b, rt, n)
					if err := p.Relist(ctx); err != nil {
						b.Fatal(err)
					}
					drain(p)
					i = 0
					b.StartTimer()
				}
				if err := rt.ExitContainer(pods[i].UID, "c0", 1, ""); err != nil {
					b.Fatal(err)
				}
				i++
				if err := p.Relist(ctx); err != nil {
					b.Fatal(err)
				}
				if len(p.Watch()) != 1 {
					b.Fatalf("want one event, have %d", len(p.Watch()))
				}
				<-p.Watch()
			}
		})
	}
}
