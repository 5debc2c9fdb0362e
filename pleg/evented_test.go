package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

type eventedFixture struct {
	rt      *fake.Runtime
	clk     *clocktesting.FakeClock
	cache   runtime.Cache
	g       *GenericPLEG
	e       *EventedPLEG
	relists atomic.Int32
	stop    func()
}

func newEventedFixture(t *testing.T) *eventedFixture {
	t.Helper()
	return newEventedFixtureWith(t, nil)
}

// newEventedFixtureWith registers both PLEGs' metrics on reg, if not nil.
func newEventedFixtureWith(t *testing.T, reg prometheus.Registerer) *eventedFixture {
	t.Helper()
	f := &eventedFixture{clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), cache: runtime.NewCache()}
	var err error
	f.rt, err = fake.New(fake.Config{Clock: f.clk})
	require.NoError(t, err)
	f.g, err = New(Config{Runtime: f.rt, Cache: f.cache, Clock: f.clk, OnRelist: func(RelistStats) { f.relists.Add(1) }, Registerer: reg})
	require.NoError(t, err)
	f.e, err = NewEvented(EventedConfig{Generic: f.g, Events: f.rt, Registerer: reg})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.e.Run(ctx) }()
	f.stop = func() {
		cancel()
		require.NoError(t, recv(t, done, "Start to return"))
	}
	return f
}

// stepUntil steps the clock a second at a time until cond holds.
func (f *eventedFixture) stepUntil(t *testing.T, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		if cond() {
			return true
		}
		f.clk.Step(time.Second)
		return false
	}, guard, time.Millisecond)
}

func TestEventedPLEGOnInMemoryRuntime(t *testing.T) {
	ctx := context.Background()
	f := newEventedFixture(t)
	defer f.stop()

	// Once streaming, the generic PLEG has relisted at start and once more
	// when the stream opened, and then waits its slow period.
	require.Eventually(t, func() bool { return f.e.Streaming() && f.relists.Load() == 2 }, guard, time.Millisecond)
	assert.Equal(t, DefaultCacheUpdatePeriod, time.Duration(f.g.period.Load()), "a stream that may drop events is checked by a relist every CacheUpdatePeriod")

	pod := podSpec("uid-web", "app")
	require.NoError(t, f.rt.SyncPod(ctx, pod, nil, nil, nil).Error())
	got := recv(t, f.e.Watch(), "ContainerStarted from the stream")
	assert.Equal(t, ContainerStarted, got.Type)
	assert.Equal(t, pod.UID, got.ID)
	s, err := f.cache.Get(pod.UID)
	require.NoError(t, err)
	require.NotNil(t, s.FindContainerStatusByName("app"))
	assert.Equal(t, runtime.ContainerStateRunning, s.FindContainerStatusByName("app").State)
	assert.Equal(t, got.ContainerID, s.FindContainerStatusByName("app").ID.String())

	require.NoError(t, f.rt.ExitContainer(pod.UID, "app", 2, ""))
	died := recv(t, f.e.Watch(), "ContainerDied from the stream")
	assert.Equal(t, PodLifecycleEvent{ID: pod.UID, Type: ContainerDied, ContainerID: got.ContainerID}, died)
	s, _ = f.cache.Get(pod.UID)
	assert.Equal(t, 2, s.FindContainerStatusByName("app").ExitCode)
	assert.Equal(t, int32(2), f.relists.Load(), "the events came from the stream, not from a relist")

	// The stream breaks: relisting resumes at the normal period, and the
	// stream is opened again after the retry period.
	f.rt.BreakContainerEvents()
	require.Eventually(t, func() bool { return !f.e.Streaming() }, guard, time.Millisecond)
	f.stepUntil(t, func() bool { return f.relists.Load() >= 4 })
	f.stepUntil(t, f.e.Streaming)
	require.Eventually(t, func() bool { return f.g.period.Load() == int64(DefaultCacheUpdatePeriod) }, guard, time.Millisecond)
	assert.NoError(t, f.e.Healthy())
}

// notStreaming is a runtime that cannot stream events.
type notStreaming struct{ *scriptedLister }

func (notStreaming) WatchContainerEvents(context.Context) (<-chan runtime.ContainerEvent, error) {
	return nil, fmt.Errorf("no events here: %w", runtime.ErrNotSupported)
}

func TestEventedPLEGWithoutStreamRelistsAtNormalPeriod(t *testing.T) {
	relisted := make(chan struct{}, 10)
	tp := newTestPLEG(t, func(c *Config) {
		c.RelistPeriod = time.Second
		c.OnRelist = func(RelistStats) { relisted <- struct{}{} }
	})
	e, err := NewEvented(EventedConfig{Generic: tp.GenericPLEG, Events: notStreaming{tp.lister}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	recv(t, relisted, "the relist at start")
	require.Eventually(t, tp.clock.HasWaiters, guard, time.Millisecond)
	tp.clock.Step(time.Second)
	recv(t, relisted, "a relist one normal period later")
	assert.False(t, e.Streaming())
	cancel()
	require.NoError(t, recv(t, done, "Start to return"))
}

func TestEventedHandle(t *testing.T) {
	tp := newTestPLEG(t, nil)
	e, err := NewEvented(EventedConfig{Generic: tp.GenericPLEG, Events: notStreaming{tp.lister}})
	require.NoError(t, err)
	t0 := tp.clock.Now()
	status := func(state runtime.ContainerState) *runtime.PodStatus {
		return &runtime.PodStatus{
			ID: "p", IPs: []string{"10.0.0.1"},
			ContainerStatuses: []*runtime.ContainerStatus{{ID: cid("c"), State: state}},
			SandboxStatuses:   []*runtime.SandboxStatus{{ID: "s", State: runtime.SandboxStateReady}},
		}
	}
	for _, tc := range []struct {
		name      string
		ev        runtime.ContainerEvent
		want      []PodLifecycleEvent
		wantState runtime.ContainerState // "" when the cache must not know the pod
	}{
		{
			name:      "created container updates the cache, sends nothing",
			ev:        runtime.ContainerEvent{ContainerID: cid("c"), Type: runtime.ContainerCreatedEvent, PodUID: "p", CreatedAt: t0, PodStatus: status(cCreated)},
			wantState: cCreated,
		},
		{
			name:      "started container",
			ev:        runtime.ContainerEvent{ContainerID: cid("c"), Type: runtime.ContainerStartedEvent, PodUID: "p", CreatedAt: t0.Add(time.Second), PodStatus: status(cRunning)},
			want:      []PodLifecycleEvent{ev("p", ContainerStarted, "c")},
			wantState: cRunning,
		},
		{
			name:      "stale event older than the cache is ignored",
			ev:        runtime.ContainerEvent{ContainerID: cid("c"), Type: runtime.ContainerStoppedEvent, PodUID: "p", CreatedAt: t0, PodStatus: status(cExited)},
			wantState: cRunning,
		},
		{
			name:      "event without status is left to the relist",
			ev:        runtime.ContainerEvent{ContainerID: cid("c"), Type: runtime.ContainerStoppedEvent, PodUID: "p", CreatedAt: t0.Add(2 * time.Second)},
			wantState: cRunning,
		},
		{
			name:      "stopped container",
			ev:        runtime.ContainerEvent{ContainerID: cid("c"), Type: runtime.ContainerStoppedEvent, PodUID: "p", CreatedAt: t0.Add(3 * time.Second), PodStatus: status(cExited)},
			want:      []PodLifecycleEvent{ev("p", ContainerDied, "c")},
			wantState: cExited,
		},
		{
			name: "deleted sandbox deletes the pod from the cache",
			ev: runtime.ContainerEvent{ContainerID: runtime.ContainerID{Type: testRuntimeType, ID: "s"}, Type: runtime.ContainerDeletedEvent, PodUID: "p", CreatedAt: t0.Add(4 * time.Second),
				PodStatus: &runtime.PodStatus{ID: "p", SandboxStatuses: []*runtime.SandboxStatus{{ID: "s", State: runtime.SandboxStateNotReady}}}},
			want: []PodLifecycleEvent{
				{ID: "p", Type: ContainerDied, ContainerID: testRuntimeType + "://s"},
				{ID: "p", Type: ContainerRemoved, ContainerID: testRuntimeType + "://s"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.handle(tc.ev)
			assert.Equal(t, events(tc.want...), drain(tp.Watch()))
			s, err := tp.cache.Get("p")
			require.NoError(t, err)
			if tc.wantState == "" {
				assert.Empty(t, s.ContainerStatuses)
				return
			}
			require.Len(t, s.ContainerStatuses, 1)
			assert.Equal(t, tc.wantState, s.ContainerStatuses[0].State)
		})
	}
}

func TestNewEventedValidates(t *testing.T) {
	tp := newTestPLEG(t, nil)
	for _, tc := range []struct {
		name string
		c    EventedConfig
	}{
		{"generic is required", EventedConfig{Events: notStreaming{tp.lister}}},
		{"events are required", EventedConfig{Generic: tp.GenericPLEG}},
		{"negative retry period", EventedConfig{Generic: tp.GenericPLEG, Events: notStreaming{tp.lister}, StreamRetryPeriod: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewEvented(tc.c)
			assert.ErrorIs(t, err, runtime.ErrInvalidConfig)
		})
	}
}

// podSpec returns a pod "web" in "default" with one container per name.
func podSpec(uid types.UID, names ...string) *v1.Pod {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", uid
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: n + ":1"})
	}
	return pod
}

// failingStream is a runtime whose event stream never opens; it records
// when each attempt was made.
type failingStream struct {
	*scriptedLister
	clk      *clocktesting.FakeClock
	attempts chan time.Time
}

func (f failingStream) WatchContainerEvents(context.Context) (<-chan runtime.ContainerEvent, error) {
	f.attempts <- f.clk.Now()
	return nil, fmt.Errorf("connection refused")
}

func TestEventedPLEGReconnectsWithBackOff(t *testing.T) {
	tp := newTestPLEG(t, nil)
	fs := failingStream{tp.lister, tp.clock, make(chan time.Time, 20)}
	e, err := NewEvented(EventedConfig{Generic: tp.GenericPLEG, Events: fs, StreamRetryPeriod: time.Second, StreamRetryMaxPeriod: 4 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, recv(t, done, "Start to return")) }()

	var at []time.Time
	for len(at) < 6 {
		select {
		case a := <-fs.attempts:
			at = append(at, a)
		case <-time.After(time.Millisecond):
			tp.clock.Step(100 * time.Millisecond)
		}
	}
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]).Round(time.Second))
	}
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}, gaps,
		"the wait doubles from StreamRetryPeriod up to StreamRetryMaxPeriod")
	assert.False(t, e.Streaming())
}

func TestEventedPLEGKeepsRunningGaugesBetweenRelists(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f := newEventedFixtureWith(t, reg)
	defer f.stop()
	require.Eventually(t, func() bool { return f.e.Streaming() && f.relists.Load() == 2 }, guard, time.Millisecond)
	pod := podSpec("uid-gauge", "a", "b")
	require.NoError(t, f.rt.SyncPod(context.Background(), pod, nil, nil, nil).Error())
	gauge := func(name, state string) float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if mf.GetName() == name && (state == "" || m.GetLabel()[0].GetValue() == state) {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	require.Eventually(t, func() bool {
		return gauge("kubelet_running_containers", "running") == 2 && gauge("kubelet_running_pods", "") == 1
	}, guard, time.Millisecond, "both containers and the pod counted from the events")
	require.NoError(t, f.rt.ExitContainer(pod.UID, "a", 0, ""))
	require.Eventually(t, func() bool {
		return gauge("kubelet_running_containers", "running") == 1 && gauge("kubelet_running_containers", "exited") == 1
	}, guard, time.Millisecond, "the exit moves one container from running to exited")
	assert.Equal(t, int32(2), f.relists.Load(), "no relist in between")
}

// silentStream is a runtime whose event stream opens and stays quiet.
type silentStream struct{ *scriptedLister }

func (silentStream) WatchContainerEvents(ctx context.Context) (<-chan runtime.ContainerEvent, error) {
	return make(chan runtime.ContainerEvent), nil
}

// startSilentStream runs an EventedPLEG over tp on a stream that stays
// quiet until the test ends, and returns once it streams, after the relist
// at start and the one when the stream opened (both reported on relisted).
func startSilentStream(t *testing.T, tp *testPLEG, relisted <-chan struct{}) {
	t.Helper()
	e, err := NewEvented(EventedConfig{Generic: tp.GenericPLEG, Events: silentStream{tp.lister}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, recv(t, done, "Start to return"))
	})
	recv(t, relisted, "the relist at start")
	recv(t, relisted, "the relist when the stream opened")
	require.Eventually(t, e.Streaming, guard, time.Millisecond)
}

// While streaming, a pod whose inspection failed in a relist is inspected
// again after the normal period, not the slow streaming one: no event may
// come to replace the error its entry holds, and the error fails every sync
// of the pod's worker until then.
func TestEventedPLEGReinspectsFailedPodAtNormalPeriod(t *testing.T) {
	relisted := make(chan struct{}, 10)
	tp := newTestPLEG(t, func(c *Config) {
		c.RelistPeriod = time.Second
		c.OnRelist = func(RelistStats) { relisted <- struct{}{} }
	})
	p := pod("uid-flaky", ctr("c1", cRunning))
	tp.lister.setPods(p)
	tp.lister.setStatus(p.ID, nil, errors.New("inspection failed"))
	startSilentStream(t, tp, relisted)
	_, err := tp.cache.Get(p.ID)
	require.Error(t, err, "the failed inspection is in the cache")

	tp.lister.setStatus(p.ID, statusOf(p.ID, p), nil)
	// The clock's waiters include more than the PLEG's wait (an inspection
	// timer may still be stopping), so a single step could pass before the
	// wait is re-timed: step a second at a time, far less in all than the
	// 5-minute streaming period, until the relist comes.
	for i := 0; ; i++ {
		require.Less(t, i, 30, "no relist within 30 normal periods after the failed inspection")
		require.Eventually(t, tp.clock.HasWaiters, guard, time.Millisecond)
		tp.clock.Step(time.Second)
		select {
		case <-relisted:
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	s, err := tp.cache.Get(p.ID)
	require.NoError(t, err)
	require.NotNil(t, s.FindContainerStatusByName("c1"))
}

// A relist made outside Start's loop (here by the caller) that fails to
// inspect a pod while streaming makes the waiting Start re-time its wait
// to the normal period, rather than sleep out the slow one it was in.
func TestEventedPLEGRetimesSlowWaitAfterIncompleteRelist(t *testing.T) {
	relisted := make(chan struct{}, 10)
	tp := newTestPLEG(t, func(c *Config) {
		c.RelistPeriod = time.Second
		c.OnRelist = func(RelistStats) { relisted <- struct{}{} }
	})
	p := pod("uid-later-flaky", ctr("c1", cRunning))
	tp.lister.setPods(p)
	startSilentStream(t, tp, relisted)

	p2 := pod(p.ID, ctr("c1", cRunning), ctr("c2", cRunning))
	tp.lister.setPods(p2)
	tp.lister.setStatus(p.ID, nil, errors.New("inspection failed"))
	require.NoError(t, tp.Relist(context.Background()))
	recv(t, relisted, "the caller's relist")
	_, err := tp.cache.Get(p.ID)
	require.Error(t, err, "the failed inspection is in the cache")

	tp.lister.setStatus(p.ID, statusOf(p.ID, p2), nil)
	tp.clock.Step(time.Second)
	recv(t, relisted, "a relist one normal period later, not one streaming period")
	s, err := tp.cache.Get(p.ID)
	require.NoError(t, err)
	require.NotNil(t, s.FindContainerStatusByName("c2"))
}

// droppingStream forwards a runtime's container events except those drop
// selects, as containerd drops events for a subscriber that lags.
type droppingStream struct {
	rt   *fake.Runtime
	drop func(runtime.ContainerEvent) bool
}

func (d droppingStream) WatchContainerEvents(ctx context.Context) (<-chan runtime.ContainerEvent, error) {
	in, err := d.rt.WatchContainerEvents(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan runtime.ContainerEvent, 16)
	go func() {
		defer close(out)
		for ev := range in {
			if d.drop(ev) {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TestEventedPLEGDeclaresTheCacheCurrentOnlyAfterARelist: a pod worker
// waiting for status newer than its sync must not get status from before
// it when the stream dropped the sync's events (kubernetes/kubernetes
// #123087): by default a relist, every CacheUpdatePeriod, finds the
// container first. A Lossless stream is trusted: the cache is declared
// current without a relist.
func TestEventedPLEGDeclaresTheCacheCurrentOnlyAfterARelist(t *testing.T) {
	for _, tc := range []struct {
		name        string
		lossless    bool
		wantApp     bool // the waiter sees the container the sync started
		wantRelists bool // a relist ran before the waiter woke
	}{
		{"a stream that may drop events is checked by a relist", false, true, true},
		{"a lossless stream is trusted", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			cache := runtime.NewCache()
			rt, err := fake.New(fake.Config{Clock: clk})
			require.NoError(t, err)
			var relists atomic.Int32
			g, err := New(Config{Runtime: rt, Cache: cache, Clock: clk, OnRelist: func(RelistStats) { relists.Add(1) }})
			require.NoError(t, err)
			const uid = "uid-dropped"
			stream := droppingStream{rt: rt, drop: func(ev runtime.ContainerEvent) bool { return ev.PodUID == uid }}
			e, err := NewEvented(EventedConfig{Generic: g, Events: stream, Lossless: tc.lossless})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			defer func() {
				cancel()
				require.NoError(t, recv(t, done, "Start to return"))
			}()
			require.Eventually(t, func() bool { return e.Streaming() && relists.Load() == 2 }, guard, time.Millisecond)

			// A pod worker's sync starts the container; its events are lost.
			require.NoError(t, rt.SyncPod(ctx, podSpec(uid, "app"), nil, nil, nil).Error())
			synced := clk.Now()
			clk.Step(time.Millisecond)
			got := make(chan *runtime.PodStatus, 1)
			go func() {
				st, err := cache.GetNewerThan(ctx, uid, synced)
				if err == nil {
					got <- st
				}
			}()
			before := relists.Load()
			var st *runtime.PodStatus
			require.Eventually(t, func() bool {
				select {
				case st = <-got:
					return true
				default:
					clk.Step(100 * time.Millisecond)
					return false
				}
			}, guard, time.Millisecond)
			app := st.FindContainerStatusByName("app")
			assert.Equal(t, tc.wantApp, app != nil && app.State == runtime.ContainerStateRunning, "status the worker got: %+v", st)
			assert.Equal(t, tc.wantRelists, relists.Load() > before, "relists before the waiter woke")
		})
	}
}

// chanStream is a stream whose events the test sends.
type chanStream chan runtime.ContainerEvent

func (c chanStream) WatchContainerEvents(context.Context) (<-chan runtime.ContainerEvent, error) {
	return c, nil
}

// TestRequestCurrentWakesAWaiter: a pod worker whose sync made the runtime
// report a change (a provider's NotifyPods from within CreatePod) waits
// for status newer than the sync's end; on a lossless stream RequestCurrent
// declares the cache current once that event is handled, so the worker
// gets it without waiting for CacheUpdatePeriod (an hour here). A stream
// that may drop events ignores the request.
func TestRequestCurrentWakesAWaiter(t *testing.T) {
	for _, lossless := range []bool{true, false} {
		t.Run(fmt.Sprintf("lossless=%v", lossless), func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			cache := runtime.NewCache()
			rt, err := fake.New(fake.Config{Clock: clk})
			require.NoError(t, err)
			g, err := New(Config{Runtime: rt, Cache: cache, Clock: clk, RelistPeriod: time.Hour})
			require.NoError(t, err)
			stream := make(chanStream, 4)
			e, err := NewEvented(EventedConfig{Generic: g, Events: stream, Lossless: lossless,
				CacheUpdatePeriod: time.Hour, StreamingRelistPeriod: time.Hour})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			defer func() {
				cancel()
				require.NoError(t, recv(t, done, "Run to return"))
			}()
			require.Eventually(t, e.Streaming, guard, time.Millisecond)
			// The first relist (at once) must be over: on the fake clock it
			// is stamped with the event's instant, and the fake runtime,
			// which does not list the notified pod, would write it empty.
			require.Eventually(t, func() bool { return g.Healthy() == nil }, guard, time.Millisecond)
			g.relistMu.Lock()
			g.relistMu.Unlock() //nolint:staticcheck // waits for a relist under way

			const uid = "uid-notified"
			during := clk.Now()
			clk.Step(time.Millisecond)
			synced := clk.Now() // the sync ends after its event
			clk.Step(time.Millisecond)
			stream <- runtime.ContainerEvent{ContainerID: runtime.ContainerID{Type: "p", ID: uid}, PodUID: uid,
				Type: runtime.ContainerStartedEvent, CreatedAt: during,
				PodStatus: &runtime.PodStatus{ID: uid, Name: "web", Namespace: "default"}}
			got := make(chan *runtime.PodStatus, 1)
			go func() {
				st, err := cache.GetNewerThan(ctx, uid, synced)
				if err == nil {
					got <- st
				}
			}()
			e.RequestCurrent()
			if !lossless {
				// Ignored: nothing is queued for the consumer (a relist may
				// still wake the waiter on this fake clock, so the waiter
				// cannot tell).
				assert.Zero(t, len(e.want), "a stream that may drop events took a request to declare the cache current")
				return
			}
			select {
			case st := <-got:
				assert.Equal(t, "web", st.Name, "the event's status")
			case <-time.After(guard):
				t.Fatal("the waiter did not wake")
			}
		})
	}
}
