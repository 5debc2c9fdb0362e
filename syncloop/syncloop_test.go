package syncloop_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/syncloop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// event is one recorded Handler call.
type event struct {
	Method string
	UIDs   []types.UID
	Arg    string
}

// recorder is a Handler (and ContainerCleaner) that reports every call on
// a channel.
type recorder struct {
	events      chan event
	cleanupErr  error
	cleanupStep func() // runs inside HandlePodCleanups
	panicOn     string
}

func newRecorder() *recorder { return &recorder{events: make(chan event, 100)} }

func uids(pods []*v1.Pod) []types.UID {
	out := make([]types.UID, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.UID)
	}
	return out
}

func (r *recorder) rec(m string, pods []*v1.Pod) {
	if r.panicOn == m {
		r.events <- event{Method: m + "-panic"}
		panic("handler bug")
	}
	r.events <- event{Method: m, UIDs: uids(pods)}
}

func (r *recorder) HandlePodAdditions(_ context.Context, p []*v1.Pod) { r.rec("add", p) }
func (r *recorder) HandlePodUpdates(_ context.Context, p []*v1.Pod)   { r.rec("update", p) }
func (r *recorder) HandlePodRemoves(_ context.Context, p []*v1.Pod)   { r.rec("remove", p) }
func (r *recorder) HandlePodReconcile(_ context.Context, p []*v1.Pod) { r.rec("reconcile", p) }
func (r *recorder) HandlePodSyncs(_ context.Context, p []*v1.Pod)     { r.rec("sync", p) }
func (r *recorder) HandlePodCleanups(context.Context) error {
	if r.cleanupStep != nil {
		r.cleanupStep()
	}
	r.events <- event{Method: "cleanup"}
	return r.cleanupErr
}
func (r *recorder) CleanUpContainersInPod(_ context.Context, uid types.UID, id string) {
	r.events <- event{Method: "cleanContainers", UIDs: []types.UID{uid}, Arg: id}
}

func (r *recorder) next(t *testing.T) event {
	t.Helper()
	return <-r.events
}

// podMap is a PodGetter.
type podMap map[types.UID]*v1.Pod

func (m podMap) GetPodByUID(uid types.UID) (*v1.Pod, bool) {
	p, ok := m[uid]
	return p, ok
}

func pod(uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, Namespace: "ns"}}
}

// readiness is a SourcesReady that reports each AllReady call.
type readiness struct {
	mu      sync.Mutex
	ready   bool
	sources []string
	asked   chan bool
}

func (s *readiness) AddSource(src string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sources = append(s.sources, src)
}

func (s *readiness) AllReady() bool {
	s.mu.Lock()
	r := s.ready
	s.mu.Unlock()
	if s.asked != nil {
		s.asked <- r
	}
	return r
}

func (s *readiness) set(r bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = r
}

// afterClock is a fake clock whose After fires at once and records the
// durations asked for, so back-off sequences are checked without waiting.
type afterClock struct {
	*clocktesting.FakeClock
	mu     sync.Mutex
	delays []time.Duration
}

func (c *afterClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.delays = append(c.delays, d)
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

func (c *afterClock) Delays() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.delays...)
}

type loopRun struct {
	updates chan podconfig.PodUpdate
	cancel  context.CancelFunc
	done    chan error
}

// start runs l over h until the test ends.
func start(t *testing.T, l *syncloop.Loop, h syncloop.Handler) *loopRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &loopRun{updates: make(chan podconfig.PodUpdate), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- l.Run(ctx, r.updates, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r
}

func newLoop(t *testing.T, c syncloop.Config) *syncloop.Loop {
	t.Helper()
	if c.Pods == nil {
		c.Pods = podMap{}
	}
	if c.Clock == nil {
		c.Clock = clocktesting.NewFakeClock(time.Unix(0, 0))
	}
	l, err := syncloop.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestSyncLoopAbort(t *testing.T) {
	l := newLoop(t, syncloop.Config{})
	ch := make(chan podconfig.PodUpdate)
	close(ch)
	if err := l.Run(context.Background(), ch, newRecorder()); err != nil {
		t.Fatalf("a closed update channel should end the loop cleanly: %v", err)
	}
}

func TestSyncLoopEndsWithContext(t *testing.T) {
	l := newLoop(t, syncloop.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Run(ctx, make(chan podconfig.PodUpdate), newRecorder()); err != nil {
		t.Fatal(err)
	}
}

func TestSyncLoopTimeUpdate(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	l := newLoop(t, syncloop.Config{Clock: clk, SyncPeriod: time.Hour, HousekeepingPeriod: time.Hour})
	if got := l.LatestLoopEntryTime(); !got.IsZero() {
		t.Fatalf("entry time before the first iteration: %v", got)
	}
	h := newRecorder()
	r := start(t, l, h)
	r.updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("a")}}
	h.next(t)
	first := l.LatestLoopEntryTime()
	if first.IsZero() {
		t.Fatal("entry time not recorded")
	}
	clk.Step(time.Second)
	r.updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("b")}}
	h.next(t)
	r.updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("c")}} // the previous iteration has ended
	h.next(t)
	if second := l.LatestLoopEntryTime(); !second.After(first) {
		t.Fatalf("entry time %v not after %v", second, first)
	}
}

func TestConfigUpdatesAreDispatchedByOperation(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   podconfig.PodOperation
		want string
	}{
		{"an ADD goes to HandlePodAdditions", podconfig.ADD, "add"},
		{"an UPDATE goes to HandlePodUpdates", podconfig.UPDATE, "update"},
		{"a DELETE goes to HandlePodUpdates", podconfig.DELETE, "update"},
		{"a REMOVE goes to HandlePodRemoves", podconfig.REMOVE, "remove"},
		{"a RECONCILE goes to HandlePodReconcile", podconfig.RECONCILE, "reconcile"},
		{"a SET is dropped", podconfig.SET, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &readiness{}
			l := newLoop(t, syncloop.Config{SourcesReady: src})
			h := newRecorder()
			r := start(t, l, h)
			r.updates <- podconfig.PodUpdate{Op: tc.op, Pods: []*v1.Pod{pod("a")}, Source: "file"}
			// a marker update proves the first one was fully handled
			r.updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("marker")}, Source: "api"}
			var got []event
			for {
				e := h.next(t)
				if reflect.DeepEqual(e.UIDs, []types.UID{"marker"}) {
					break
				}
				got = append(got, e)
			}
			var want []event
			if tc.want != "" {
				want = []event{{Method: tc.want, UIDs: []types.UID{"a"}}}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("calls %+v, want %+v", got, want)
			}
			src.mu.Lock()
			defer src.mu.Unlock()
			// the first update's source was recorded before the marker came
			if len(src.sources) == 0 || src.sources[0] != "file" {
				t.Errorf("sources seen %v", src.sources)
			}
		})
	}
}

func TestPLEGEvents(t *testing.T) {
	ev := func(id types.UID, typ pleg.PodLifecycleEventType, cid string, more bool) pleg.PodLifecycleEvent {
		return pleg.PodLifecycleEvent{ID: id, Type: typ, ContainerID: cid, More: more}
	}
	syncA := event{Method: "sync", UIDs: []types.UID{"a"}}
	syncB := event{Method: "sync", UIDs: []types.UID{"b"}}
	for _, tc := range []struct {
		name string
		evs  []pleg.PodLifecycleEvent
		want []event
	}{
		{"a started container syncs its pod", []pleg.PodLifecycleEvent{ev("a", pleg.ContainerStarted, "c://1", false)},
			[]event{syncA}},
		{"a dead container syncs its pod and cleans up dead containers", []pleg.PodLifecycleEvent{ev("a", pleg.ContainerDied, "c://1", false)},
			[]event{syncA, {Method: "cleanContainers", UIDs: []types.UID{"a"}, Arg: "c://1"}}},
		{"a removed container does not sync", []pleg.PodLifecycleEvent{ev("a", pleg.ContainerRemoved, "c://1", false)}, nil},
		{"a pod sync event syncs", []pleg.PodLifecycleEvent{ev("a", pleg.PodSync, "", false)}, []event{syncA}},
		{"an event of an unknown pod is ignored", []pleg.PodLifecycleEvent{ev("zz", pleg.ContainerStarted, "", false)}, nil},
		{"a dead container of an unknown pod is still cleaned up", []pleg.PodLifecycleEvent{ev("zz", pleg.ContainerDied, "c://2", false)},
			[]event{{Method: "cleanContainers", UIDs: []types.UID{"zz"}, Arg: "c://2"}}},
		{"one relist's events of a pod sync it once, at the last", []pleg.PodLifecycleEvent{
			ev("a", pleg.ContainerStarted, "c://1", true), ev("b", pleg.ContainerStarted, "c://3", false),
			ev("a", pleg.ContainerStarted, "c://2", false)},
			[]event{syncB, syncA}},
		{"a dead container is cleaned up at once, its sync waits for the last event", []pleg.PodLifecycleEvent{
			ev("a", pleg.ContainerDied, "c://1", true), ev("a", pleg.ContainerRemoved, "c://2", false)},
			[]event{{Method: "cleanContainers", UIDs: []types.UID{"a"}, Arg: "c://1"}, syncA}},
		{"events of a pod that need no sync make none", []pleg.PodLifecycleEvent{
			ev("a", pleg.ContainerRemoved, "c://1", true), ev("a", pleg.ContainerRemoved, "c://2", false)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plegCh := make(chan pleg.PodLifecycleEvent)
			l := newLoop(t, syncloop.Config{PLEG: plegCh, Pods: podMap{"a": pod("a"), "b": pod("b")}})
			h := newRecorder()
			r := start(t, l, h)
			for _, e := range tc.evs {
				plegCh <- e
			}
			r.updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("marker")}}
			var got []event
			for e := h.next(t); e.Method != "add"; e = h.next(t) {
				got = append(got, e)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("calls %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A PLEG event and a config update ready at once are taken in that order,
// not as a select's random pick: a relist's event of a pod its source has
// not added yet is dropped in every run (on virtual time they are often
// ready in the same instant, and a simulation must not depend on the pick).
func TestPLEGEventsReadyWithAnUpdateGoFirst(t *testing.T) {
	for i := range 20 {
		plegCh := make(chan pleg.PodLifecycleEvent, 1)
		plegCh <- pleg.PodLifecycleEvent{ID: "a", Type: pleg.ContainerStarted, ContainerID: "c://1"}
		pods := &addedPods{m: podMap{}}
		l := newLoop(t, syncloop.Config{PLEG: plegCh, Pods: pods})
		h := &adder{recorder: newRecorder(), pods: pods}
		ctx, cancel := context.WithCancel(context.Background())
		updates := make(chan podconfig.PodUpdate, 2)
		updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("a")}}
		updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("marker")}}
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx, updates, h) }()
		var got []string
		for e := h.next(t); len(e.UIDs) == 0 || e.UIDs[0] != "marker"; e = h.next(t) {
			got = append(got, e.Method)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, []string{"add"}) {
			t.Fatalf("run %d: calls %q, want only the add (the event came before its pod)", i, got)
		}
	}
}

// addedPods is a PodGetter that HandlePodAdditions fills.
type addedPods struct {
	mu sync.Mutex
	m  podMap
}

func (p *addedPods) GetPodByUID(uid types.UID) (*v1.Pod, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.GetPodByUID(uid)
}

// adder is a recorder whose additions reach its addedPods.
type adder struct {
	*recorder
	pods *addedPods
}

func (a *adder) HandlePodAdditions(ctx context.Context, ps []*v1.Pod) {
	a.pods.mu.Lock()
	for _, p := range ps {
		a.pods.m[p.UID] = p
	}
	a.pods.mu.Unlock()
	a.recorder.HandlePodAdditions(ctx, ps)
}

func TestClosedPLEGChannelDoesNotStopTheLoop(t *testing.T) {
	plegCh := make(chan pleg.PodLifecycleEvent)
	close(plegCh)
	l := newLoop(t, syncloop.Config{PLEG: plegCh})
	h := newRecorder()
	r := start(t, l, h)
	r.updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("a")}}
	if e := h.next(t); e.Method != "add" {
		t.Fatalf("got %+v", e)
	}
}

func TestSyncTickSyncsDuePods(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	q := podworkers.NewQueue(clk)
	q.Enqueue("a", 0)
	q.Enqueue("b", 10*time.Second)
	q.Enqueue("gone", 0) // no longer known: skipped
	l := newLoop(t, syncloop.Config{Clock: clk, DuePods: q, Pods: podMap{"a": pod("a"), "b": pod("b")},
		SyncPeriod: time.Second, HousekeepingPeriod: time.Hour})
	h := newRecorder()
	start(t, l, h)
	for clk.Waiters() < 2 {
		// the sync and housekeeping tickers exist once Run has started
		gosched()
	}
	clk.Step(time.Second)
	if e := h.next(t); !reflect.DeepEqual(e, event{Method: "sync", UIDs: []types.UID{"a"}}) {
		t.Fatalf("first tick: %+v", e)
	}
	clk.Step(9 * time.Second)
	if e := h.next(t); !reflect.DeepEqual(e, event{Method: "sync", UIDs: []types.UID{"b"}}) {
		t.Fatalf("tick at 10s: %+v", e)
	}
}

func TestHousekeepingWaitsForSources(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	src := &readiness{asked: make(chan bool)}
	var logs logBuffer
	l := newLoop(t, syncloop.Config{Clock: clk, SourcesReady: src, SyncPeriod: time.Hour, HousekeepingPeriod: 2 * time.Second,
		HousekeepingWarning: time.Second, Log: logs.logger()})
	h := newRecorder()
	h.cleanupStep = func() { clk.Step(1500 * time.Millisecond) } // a slow housekeeping
	r := start(t, l, h)
	// Both tickers: with only the sync ticker made, the step below could
	// come before the housekeeping ticker exists, which would then never
	// fire at 2s.
	for clk.Waiters() < 2 {
		gosched()
	}
	clk.Step(2 * time.Second)
	if ready := <-src.asked; ready {
		t.Fatal("sources should not be ready yet")
	}
	r.updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("marker")}}
	if e := h.next(t); e.Method != "add" {
		t.Fatalf("housekeeping ran before the sources were ready: %+v", e)
	}
	src.set(true)
	clk.Step(2 * time.Second)
	<-src.asked
	if e := h.next(t); e.Method != "cleanup" {
		t.Fatalf("housekeeping did not run once sources were ready: %+v", e)
	}
	r.updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("marker")}}
	h.next(t)
	if !logs.contains("Housekeeping took longer than expected") {
		t.Errorf("no warning for a slow housekeeping; logs: %v", logs.lines())
	}
}

func TestRuntimeErrorsBackOff(t *testing.T) {
	clk := &afterClock{FakeClock: clocktesting.NewFakeClock(time.Unix(0, 0))}
	var mu sync.Mutex
	failures := 8
	calls := make(chan struct{}, 100)
	l := newLoop(t, syncloop.Config{Clock: clk, SyncPeriod: time.Hour, HousekeepingPeriod: time.Hour,
		RuntimeErrors: func() error {
			calls <- struct{}{}
			mu.Lock()
			defer mu.Unlock()
			if failures > 0 {
				failures--
				return errors.New("container runtime is down")
			}
			return nil
		}})
	h := newRecorder()
	r := start(t, l, h)
	// while the runtime fails nothing is dispatched; the update waits
	r.updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("a")}}
	if e := h.next(t); e.Method != "add" {
		t.Fatalf("got %+v", e)
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms}
	if got := clk.Delays(); !reflect.DeepEqual(got, want) {
		t.Fatalf("back-off %v, want %v", got, want)
	}
	if got := len(calls); got < 9 {
		t.Fatalf("runtime checked %d times, want at least 9", got)
	}
	// a success resets the back-off
	mu.Lock()
	failures = 1
	mu.Unlock()
	r.updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("b")}}
	h.next(t)
	r.updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("c")}}
	h.next(t)
	if got := clk.Delays(); got[len(got)-1] != 100*ms {
		t.Fatalf("back-off after a success %v, want it to start over at 100ms", got)
	}
}

func TestHandlerPanicDoesNotStopTheLoop(t *testing.T) {
	l := newLoop(t, syncloop.Config{})
	h := newRecorder()
	h.panicOn = "add"
	r := start(t, l, h)
	r.updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("a")}}
	if e := h.next(t); e.Method != "add-panic" {
		t.Fatalf("got %+v", e)
	}
	r.updates <- podconfig.PodUpdate{Op: podconfig.UPDATE, Pods: []*v1.Pod{pod("a")}}
	if e := h.next(t); e.Method != "update" {
		t.Fatalf("the loop died with the handler: %+v", e)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := syncloop.New(syncloop.Config{}); !errors.Is(err, syncloop.ErrInvalidConfig) {
		t.Errorf("missing Pods: %v", err)
	}
	if _, err := syncloop.New(syncloop.Config{Pods: podMap{}, SyncPeriod: -1}); !errors.Is(err, syncloop.ErrInvalidConfig) {
		t.Errorf("negative period: %v", err)
	}
	l := newLoop(t, syncloop.Config{})
	if err := l.Run(context.Background(), nil, nil); !errors.Is(err, syncloop.ErrInvalidConfig) {
		t.Errorf("nil handler: %v", err)
	}
}

// A PodConfig in a snapshot mode delivers SETs, which the loop cannot
// dispatch: New refuses it up front rather than Run dropping every update.
func TestNewRefusesSnapshotPodConfig(t *testing.T) {
	for _, tt := range []struct {
		mode podconfig.NotificationMode
		ok   bool
	}{
		{podconfig.Incremental, true},
		{podconfig.Snapshot, false},
		{podconfig.SnapshotAndUpdates, false},
	} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			pc, err := podconfig.NewPodConfig(tt.mode, podconfig.Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = syncloop.New(syncloop.Config{Pods: podMap{}, Source: pc})
			if tt.ok {
				if err != nil {
					t.Errorf("New with an Incremental PodConfig: %v", err)
				}
				return
			}
			if !errors.Is(err, syncloop.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.mode.String()) {
				t.Errorf("New with a %v PodConfig: %v, want an ErrInvalidConfig naming the mode", tt.mode, err)
			}
		})
	}
}

// logBuffer collects log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf []string
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.buf = append(b.buf, fmt.Sprint(prefix, args))
	}, funcr.Options{Verbosity: 4})
}

func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.buf...)
}

func (b *logBuffer) contains(s string) bool {
	for _, l := range b.lines() {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}
