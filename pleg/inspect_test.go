package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// guard bounds a blocking receive in a test so that a broken PLEG fails the
// test instead of hanging it; it asserts nothing about speed.
const guard = 30 * time.Second

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		require.FailNow(t, "timed out waiting for "+what)
		panic("unreachable")
	}
}

func TestHungInspectionDoesNotDelayOtherPods(t *testing.T) {
	const timeout = 30 * time.Second
	tp := newTestPLEG(t, func(c *Config) {
		c.InspectParallelism = 2
		c.InspectTimeout = timeout
	})
	entered := make(chan struct{})
	tp.lister.statusFn = func(ctx context.Context, uid types.UID) (*runtime.PodStatus, error) {
		if uid == "hung" {
			close(entered)
			<-ctx.Done() // a runtime that never answers but honours ctx
			return nil, ctx.Err()
		}
		return statusOf(uid, pod(uid, ctr("c-"+string(uid), cRunning))), nil
	}
	tp.lister.setPods(
		pod("hung", ctr("c-hung", cRunning)),
		pod("a", ctr("c-a", cRunning)),
		pod("b", ctr("c-b", cRunning)),
		pod("c", ctr("c-c", cRunning)),
	)
	done := make(chan error, 1)
	go func() { done <- tp.Relist(context.Background()) }()
	// Inspections start serially; a pass that has finished none after
	// inspectAdaptAfter gets its helpers.
	recv(t, entered, "the hung inspection to start")
	tp.clock.Step(inspectAdaptAfter)

	// The hung call's timeout has not fired: the other pods' events must
	// arrive while it still hangs.
	var got []PodLifecycleEvent
	for range 3 {
		got = append(got, recv(t, tp.Watch(), "events of the pods that answer"))
	}
	sortEvents(got)
	assert.Equal(t, events(
		ev("a", ContainerStarted, "c-a"),
		ev("b", ContainerStarted, "c-b"),
		ev("c", ContainerStarted, "c-c"),
	), got)
	select {
	case <-done:
		require.FailNow(t, "relist returned while an inspection hangs and its timeout has not passed")
	default:
	}

	tp.clock.Step(timeout)
	require.NoError(t, recv(t, done, "the relist to end after the inspection timeout"))
	assert.Empty(t, drain(tp.Watch()), "no events for the pod that timed out")
	_, err := tp.cache.Get("hung")
	assert.ErrorIs(t, err, ErrInspectionTimeout)
	assert.ErrorIs(t, err, context.Canceled)
	st := tp.lastStats()
	assert.Equal(t, 4, st.Inspected)
	assert.Equal(t, 1, st.InspectErrors)

	// Next relist: only the timed-out pod is inspected, and now it answers.
	tp.lister.statusFn = nil
	tp.lister.takeCalls()
	tp.relist(t)
	assert.Equal(t, []types.UID{"hung"}, tp.lister.takeCalls())
	assert.Equal(t, events(ev("hung", ContainerStarted, "c-hung")), drain(tp.Watch()))
}

func TestInspectionRunsInParallelUpToTheLimit(t *testing.T) {
	const parallelism, pods = 4, 12
	tp := newTestPLEG(t, func(c *Config) { c.InspectParallelism = parallelism })
	var (
		mu               sync.Mutex
		inflight, max, n int
		allIn            = make(chan struct{})
		firstIn          = make(chan struct{})
		ctx, cancel      = context.WithCancel(context.Background())
		listed           []*runtime.Pod
		wantEvents       []PodLifecycleEvent
	)
	defer cancel()
	tp.lister.statusFn = func(ctx context.Context, uid types.UID) (*runtime.PodStatus, error) {
		mu.Lock()
		inflight++
		n++
		max = maxInt(max, inflight)
		if n == 1 {
			close(firstIn)
		}
		if n == parallelism {
			close(allIn) // the first calls wait until parallelism of them run
		}
		mu.Unlock()
		select {
		case <-allIn:
		case <-ctx.Done():
		}
		mu.Lock()
		inflight--
		mu.Unlock()
		return statusOf(uid, pod(uid, ctr("c-"+string(uid), cRunning))), ctx.Err()
	}
	for i := range pods {
		uid := types.UID(fmt.Sprintf("pod-%02d", i))
		listed = append(listed, pod(uid, ctr("c-"+string(uid), cRunning)))
		wantEvents = append(wantEvents, ev(uid, ContainerStarted, "c-"+string(uid)))
	}
	tp.lister.setPods(listed...)
	done := make(chan error, 1)
	go func() { done <- tp.Relist(ctx) }()
	// The first inspection blocks; the pace check then starts the helpers.
	recv(t, firstIn, "the first inspection")
	tp.clock.Step(inspectAdaptAfter)
	require.NoError(t, recv(t, done, "the relist (a serial inspection would wait forever)"))

	assert.Equal(t, parallelism, max, "never more than InspectParallelism calls at once")
	assert.Equal(t, events(wantEvents...), drain(tp.Watch()))
	for _, p := range listed {
		s, err := tp.cache.Get(p.ID)
		require.NoError(t, err)
		assert.Equal(t, p.ID, s.ID)
	}
	assert.Equal(t, pods, tp.lastStats().Events.Started)
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func TestPanickingInspectionIsAnErrorForThatPodOnly(t *testing.T) {
	tp := newTestPLEG(t, nil)
	tp.lister.statusFn = func(ctx context.Context, uid types.UID) (*runtime.PodStatus, error) {
		if uid == "bad" {
			panic("runtime bug")
		}
		return statusOf(uid, pod(uid, ctr("c-"+string(uid), cRunning))), nil
	}
	tp.lister.setPods(pod("bad", ctr("c-bad", cRunning)), pod("good", ctr("c-good", cRunning)))
	tp.relist(t)
	assert.Equal(t, events(ev("good", ContainerStarted, "c-good")), drain(tp.Watch()))
	_, err := tp.cache.Get("bad")
	assert.ErrorContains(t, err, "runtime bug")
	assert.Equal(t, 1, tp.lastStats().InspectErrors)
}

func TestCancelledRelistLeavesCacheTimeAndReinspects(t *testing.T) {
	tp := newTestPLEG(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	tp.lister.statusFn = func(ictx context.Context, uid types.UID) (*runtime.PodStatus, error) {
		cancel() // the PLEG is stopped while inspecting
		<-ictx.Done()
		return nil, ictx.Err()
	}
	tp.lister.setPods(pod("p", ctr("c", cRunning)))
	t0 := tp.clock.Now()
	require.ErrorIs(t, tp.Relist(ctx), context.Canceled)
	assert.Empty(t, drain(tp.Watch()))
	_, err := tp.cache.Get("p")
	assert.NoError(t, err, "shutting down is not the pod's error")
	expired, stop := context.WithCancel(context.Background())
	stop()
	_, err = tp.cache.GetNewerThan(expired, "p", t0.Add(-time.Nanosecond))
	assert.ErrorIs(t, err, context.Canceled, "the cache time was not advanced")

	tp.lister.statusFn = nil
	tp.relist(t)
	assert.Equal(t, events(ev("p", ContainerStarted, "c")), drain(tp.Watch()), "the pod is inspected at the next relist")
}

func TestCacheIsStampedWithRelistStartAndWaitersWake(t *testing.T) {
	tp := newTestPLEG(t, nil)
	tp.lister.setPods(pod("steady", ctr("s", cRunning)), pod("p", ctr("c", cRunning)))
	tp.relist(t)
	drain(tp.Watch())

	tp.clock.Step(time.Second)
	t1 := tp.clock.Now()
	waiter := make(chan error, 1)
	waiting := make(chan struct{})
	go func() {
		close(waiting)
		_, err := tp.cache.GetNewerThan(context.Background(), "steady", t1.Add(-time.Nanosecond))
		waiter <- err
	}()
	<-waiting

	// Inspection takes 5s; the status must still be stamped with t1.
	tp.lister.statusFn = func(ctx context.Context, uid types.UID) (*runtime.PodStatus, error) {
		tp.clock.Step(5 * time.Second)
		return statusOf(uid, pod(uid, ctr("c", cExited))), nil
	}
	tp.lister.setPods(pod("steady", ctr("s", cRunning)), pod("p", ctr("c", cExited)))
	tp.relist(t)
	assert.Equal(t, events(ev("p", ContainerDied, "c")), drain(tp.Watch()))
	require.NoError(t, recv(t, waiter, "UpdateTime to wake the waiter of an unchanged pod"))

	expired, stop := context.WithCancel(context.Background())
	stop()
	s, err := tp.cache.GetNewerThan(expired, "p", t1.Add(-time.Nanosecond))
	require.NoError(t, err)
	assert.Equal(t, cExited, s.ContainerStatuses[0].State)
	_, err = tp.cache.GetNewerThan(expired, "p", t1)
	assert.ErrorIs(t, err, context.Canceled, "not stamped later than the relist's start")
}

func TestStartRelistsEveryPeriodUntilCancelled(t *testing.T) {
	relisted := make(chan struct{}, 10)
	tp := newTestPLEG(t, func(c *Config) {
		c.RelistPeriod = time.Second
		c.OnRelist = func(RelistStats) { relisted <- struct{}{} }
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tp.Run(ctx) }()

	recv(t, relisted, "the relist at start")
	for range 2 {
		require.Eventually(t, tp.clock.HasWaiters, guard, time.Millisecond)
		tp.clock.Step(time.Second)
		recv(t, relisted, "a relist one period later")
	}
	assert.ErrorIs(t, tp.Run(ctx), ErrAlreadyStarted)
	cancel()
	assert.NoError(t, recv(t, done, "Start to return"))
	assert.NoError(t, tp.Healthy())
}

func TestShorterRelistPeriodAppliesWhileRunning(t *testing.T) {
	lists := make(chan struct{}, 100)
	tp := newTestPLEG(t, func(c *Config) {
		c.RelistPeriod = time.Hour
		c.OnRelist = func(RelistStats) { lists <- struct{}{} }
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tp.Run(ctx) }()
	recv(t, lists, "the relist at start")

	require.NoError(t, tp.SetRelistDuration(time.Second, time.Minute))
	// Step in seconds until the next relist. With the old period this would
	// take 3,600 steps; the bound below allows far fewer.
	steps := 0
	require.Eventually(t, func() bool {
		select {
		case <-lists:
			return true
		default:
			steps++
			tp.clock.Step(time.Second)
			return false
		}
	}, guard, time.Millisecond)
	assert.Less(t, steps, 3600)
	cancel()
	assert.NoError(t, recv(t, done, "Start to return"))
}

func TestRequestedRelistComesAfterTheMinimumIntervalNotThePeriod(t *testing.T) {
	lists := make(chan struct{}, 100)
	tp := newTestPLEG(t, func(c *Config) {
		c.RelistPeriod = time.Hour
		c.MinRelistInterval = 100 * time.Millisecond
		c.OnRelist = func(RelistStats) { lists <- struct{}{} }
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tp.Run(ctx) }()
	recv(t, lists, "the relist at start")
	noRelist := func(why string) {
		t.Helper()
		select {
		case <-lists:
			t.Fatal(why)
		case <-time.After(50 * time.Millisecond):
		}
	}

	tp.RequestRelist()
	tp.RequestRelist() // coalesced with the first
	require.Eventually(t, tp.clock.HasWaiters, guard, time.Millisecond)
	tp.clock.Step(99 * time.Millisecond)
	noRelist("relisted before the minimum interval passed")
	tp.clock.Step(time.Millisecond)
	recv(t, lists, "the requested relist once the minimum interval passed")

	// Both requests were served: the next relist is a period away again.
	require.Eventually(t, tp.clock.HasWaiters, guard, time.Millisecond)
	tp.clock.Step(time.Second)
	noRelist("relisted again without a request")
	cancel()
	assert.NoError(t, recv(t, done, "Run to return"))
}

func TestNewValidatesAndDefaults(t *testing.T) {
	lister, cache := &scriptedLister{}, runtime.NewCache()
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"runtime is required", func(c *Config) { c.Runtime = nil }},
		{"cache is required", func(c *Config) { c.Cache = nil }},
		{"negative relist period", func(c *Config) { c.RelistPeriod = -1 }},
		{"negative threshold", func(c *Config) { c.RelistThreshold = -1 }},
		{"negative channel capacity", func(c *Config) { c.EventChannelCapacity = -1 }},
		{"negative parallelism", func(c *Config) { c.InspectParallelism = -1 }},
		{"negative inspection timeout", func(c *Config) { c.InspectTimeout = -1 }},
		{"negative minimum relist interval", func(c *Config) { c.MinRelistInterval = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Runtime: lister, Cache: cache}
			tc.mod(&c)
			_, err := New(c)
			assert.ErrorIs(t, err, runtime.ErrInvalidConfig)
		})
	}

	g, err := New(Config{Runtime: lister, Cache: cache})
	require.NoError(t, err)
	assert.Equal(t, DefaultRelistPeriod, time.Duration(g.period.Load()))
	assert.Equal(t, DefaultRelistThreshold, time.Duration(g.threshold.Load()))
	assert.Equal(t, DefaultEventChannelCapacity, cap(g.events))
	assert.Equal(t, DefaultInspectParallelism, g.parallelism)
	assert.Equal(t, DefaultInspectTimeout, g.inspectTimeout)
	assert.Equal(t, DefaultMinRelistInterval, g.minInterval)
	assert.NotNil(t, g.clock)

	assert.ErrorIs(t, g.SetRelistDuration(0, time.Minute), runtime.ErrInvalidConfig)
	assert.ErrorIs(t, g.SetRelistDuration(time.Second, -1), runtime.ErrInvalidConfig)
	assert.Equal(t, DefaultRelistPeriod, time.Duration(g.period.Load()), "a rejected change changes nothing")
}

func TestOnRelistPanicDoesNotEscape(t *testing.T) {
	tp := newTestPLEG(t, func(c *Config) { c.OnRelist = func(RelistStats) { panic("metrics bug") } })
	tp.lister.setPods(pod("p", ctr("c", cRunning)))
	assert.NotPanics(t, func() { tp.relist(t) })
	assert.Len(t, drain(tp.Watch()), 1)
}

func TestListErrorIsReturnedAndChangesNothing(t *testing.T) {
	tp := newTestPLEG(t, nil)
	tp.lister.setPods(pod("p", ctr("c", cRunning)))
	tp.relist(t)
	drain(tp.Watch())
	listErr := errors.New("runtime down")
	tp.lister.mu.Lock()
	tp.lister.listErr = listErr
	tp.lister.mu.Unlock()
	assert.ErrorIs(t, tp.Relist(context.Background()), listErr)
	assert.Empty(t, drain(tp.Watch()), "a failed listing is not an empty one")
	s, err := tp.cache.Get("p")
	require.NoError(t, err)
	assert.Equal(t, types.UID("p"), s.ID)
}

func TestFastInspectionsStaySerial(t *testing.T) {
	tp := newTestPLEG(t, func(c *Config) { c.InspectParallelism = 4 })
	var (
		mu              sync.Mutex
		inflight, maxIn int
		listed          []*runtime.Pod
	)
	tp.lister.statusFn = func(ctx context.Context, uid types.UID) (*runtime.PodStatus, error) {
		mu.Lock()
		inflight++
		maxIn = maxInt(maxIn, inflight)
		mu.Unlock()
		defer func() { mu.Lock(); inflight--; mu.Unlock() }()
		return statusOf(uid, pod(uid, ctr("c-"+string(uid), cRunning))), nil
	}
	for i := range 50 {
		uid := types.UID(fmt.Sprintf("pod-%02d", i))
		listed = append(listed, pod(uid, ctr("c-"+string(uid), cRunning)))
	}
	tp.lister.setPods(listed...)
	tp.relist(t) // the fake clock stands still: no inspection is slow
	assert.Equal(t, 1, maxIn, "inspections that finish at once run one at a time")
	assert.Equal(t, 50, tp.lastStats().Events.Started)
}

func TestInspectionsSlowerThanThePaceGoParallel(t *testing.T) {
	const pods = 8
	tp := newTestPLEG(t, func(c *Config) { c.InspectParallelism = 2 })
	var (
		mu       sync.Mutex
		n        int
		listed   []*runtime.Pod
		secondIn = make(chan struct{})
		stepped  = make(chan struct{})
		fourthIn = make(chan struct{})
		alone    bool
	)
	tp.lister.statusFn = func(ctx context.Context, uid types.UID) (*runtime.PodStatus, error) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		switch k {
		case 2: // finishes only after the pace check: far slower than inspectSlowItem
			close(secondIn)
			<-stepped
		case 3: // returns once another inspection runs beside it
			select {
			case <-fourthIn:
			case <-time.After(10 * time.Second):
				alone = true
			}
		case 4:
			close(fourthIn)
		}
		return statusOf(uid, pod(uid, ctr("c-"+string(uid), cRunning))), nil
	}
	for i := range pods {
		uid := types.UID(fmt.Sprintf("pod-%02d", i))
		listed = append(listed, pod(uid, ctr("c-"+string(uid), cRunning)))
	}
	tp.lister.setPods(listed...)
	done := make(chan error, 1)
	go func() { done <- tp.Relist(context.Background()) }()
	recv(t, secondIn, "the second inspection")
	tp.clock.Step(inspectAdaptAfter) // one inspection done in 1ms: slow
	close(stepped)
	require.NoError(t, recv(t, done, "the relist"))
	assert.False(t, alone, "after a slow pace, inspections run in parallel")
	assert.Equal(t, pods, tp.lastStats().Events.Started)
}

func TestEachInspectionHasItsOwnTimeoutAfterOneTimesOut(t *testing.T) {
	const timeout = 30 * time.Second
	tp := newTestPLEG(t, func(c *Config) {
		c.InspectParallelism = 1 // one worker inspects all three in turn
		c.InspectTimeout = timeout
	})
	type call struct {
		uid     types.UID
		ctx     context.Context
		release chan struct{}
	}
	calls := make(chan call)
	tp.lister.statusFn = func(ctx context.Context, uid types.UID) (*runtime.PodStatus, error) {
		c := call{uid: uid, ctx: ctx, release: make(chan struct{})}
		calls <- c
		select {
		case <-c.release:
			return statusOf(uid, pod(uid, ctr("c-"+string(uid), cRunning))), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	tp.lister.setPods(
		pod("a", ctr("c-a", cRunning)),
		pod("b", ctr("c-b", cRunning)),
		pod("c", ctr("c-c", cRunning)),
	)
	done := make(chan error, 1)
	go func() { done <- tp.Relist(context.Background()) }()

	// The first answers after two thirds of the timeout.
	first := recv(t, calls, "the first inspection")
	tp.clock.Step(timeout * 2 / 3)
	require.NoError(t, first.ctx.Err())
	close(first.release)

	// The second's timeout counts from its own start, not the first's.
	second := recv(t, calls, "the second inspection")
	tp.clock.Step(timeout * 2 / 3)
	require.NoError(t, second.ctx.Err(), "timed out counting the first inspection's time")
	tp.clock.Step(timeout / 3)
	require.ErrorIs(t, context.Cause(second.ctx), ErrInspectionTimeout)

	// The third is not cancelled by the second's timeout and has its own.
	third := recv(t, calls, "the third inspection")
	require.NoError(t, third.ctx.Err(), "cancelled by an earlier inspection's timeout")
	tp.clock.Step(timeout - time.Second)
	require.NoError(t, third.ctx.Err())
	close(third.release)
	require.NoError(t, recv(t, done, "the relist"))

	for uid, wantErr := range map[types.UID]bool{first.uid: false, second.uid: true, third.uid: false} {
		_, err := tp.cache.Get(uid)
		if wantErr {
			assert.ErrorIs(t, err, ErrInspectionTimeout, "pod %s", uid)
		} else {
			assert.NoError(t, err, "pod %s", uid)
		}
	}
}

// listedLister is a runtime that can inspect a pod from its listing.
type listedLister struct {
	*scriptedLister
	listed []*runtime.Pod
}

func (l *listedLister) GetPodStatusListed(ctx context.Context, pod *runtime.Pod) (*runtime.PodStatus, error) {
	l.mu.Lock()
	l.listed = append(l.listed, pod)
	l.mu.Unlock()
	return statusOf(pod.ID, pod), nil
}

// A runtime that can inspect a pod from the relist's listing of it is
// asked that way, with the pod as listed, and not to list it again.
func TestRelistInspectsFromTheListingWhenTheRuntimeCan(t *testing.T) {
	ll := &listedLister{scriptedLister: &scriptedLister{}}
	tp := newTestPLEG(t, func(c *Config) { c.Runtime = ll })
	p := pod("uid-a", ctr("c1", cRunning))
	ll.setPods(p)
	tp.relist(t)
	require.Len(t, ll.listed, 1)
	assert.Same(t, p, ll.listed[0], "the listed pod itself")
	assert.Empty(t, ll.takeCalls(), "GetPodStatus not called")
	s, err := tp.cache.Get("uid-a")
	require.NoError(t, err)
	require.Equal(t, cRunning, s.ContainerStatuses[0].State)
}
