package podworkers_test

import (
	"context"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/podworkers/podworkerstest"
	"github.com/nodekit/nodekit/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Shorthands for the syncer's methods in expected histories.
const (
	mSync        = podworkerstest.SyncPod
	mTerminating = podworkerstest.SyncTerminatingPod
	mRuntime     = podworkerstest.SyncTerminatingRuntimePod
	mTerminated  = podworkerstest.SyncTerminatedPod
)

// queueItem is one Enqueue call.
type queueItem struct {
	UID   types.UID
	Delay time.Duration
}

// recQueue records Enqueue calls; Take returns and forgets them.
type recQueue struct {
	mu    sync.Mutex
	items []queueItem
}

func (q *recQueue) Enqueue(uid types.UID, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = append(q.items, queueItem{uid, d})
}

func (q *recQueue) Take() []queueItem {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}

func (q *recQueue) TakeSet() map[types.UID]bool {
	set := map[types.UID]bool{}
	for _, it := range q.Take() {
		set[it.UID] = true
	}
	return set
}

type harness struct {
	t     *testing.T
	p     *podworkers.PodWorkers
	s     *podworkerstest.Syncer
	q     *recQueue
	cache *podworkerstest.Cache
	clock *clocktesting.FakePassiveClock
	holds *podworkers.Holds
}

// newHarness runs PodWorkers over a recording syncer, a cache that never
// waits and a recording queue; cleanup stops them and waits for the workers.
func newHarness(t *testing.T, mod func(*podworkers.Config)) *harness {
	t.Helper()
	h := &harness{
		t: t, s: &podworkerstest.Syncer{}, q: &recQueue{}, cache: podworkerstest.NewCache(),
		clock: clocktesting.NewFakePassiveClock(time.Unix(1, 0)), holds: &podworkers.Holds{},
	}
	c := podworkers.Config{Syncer: h.s, Cache: h.cache, ResyncQueue: h.q, Clock: h.clock,
		ResyncInterval: time.Minute, BackOff: 10 * time.Second, TransientBackOff: time.Second}
	if mod != nil {
		mod(&c)
	}
	p, err := podworkers.New(c)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	p.InstallHolds(h.holds)
	runUntilCleanup(t, p)
	return h
}

// runUntilCleanup runs p until the test ends, and checks Run's error.
func runUntilCleanup(t *testing.T, p *podworkers.PodWorkers) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func (h *harness) update(o podworkers.UpdatePodOptions) {
	h.t.Helper()
	if err := h.p.UpdatePod(o); err != nil {
		h.t.Fatalf("UpdatePod: %v", err)
	}
}

func (h *harness) create(pod *v1.Pod) {
	h.t.Helper()
	h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod})
}

func (h *harness) upd(pod *v1.Pod) {
	h.t.Helper()
	h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodUpdate, Pod: pod})
}

func (h *harness) kill(pod *v1.Pod) {
	h.t.Helper()
	h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: pod})
}

func newNamedPod(uid, ns, name string, static bool) *v1.Pod {
	thirty := int64(30)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: ns, Name: name},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: &thirty},
	}
	if static {
		pod.Annotations = map[string]string{podutil.ConfigSourceAnnotationKey: podutil.FileSource}
	}
	return pod
}

func withPhase(pod *v1.Pod, phase v1.PodPhase) *v1.Pod {
	pod.Status.Phase = phase
	return pod
}

func withDeletion(pod *v1.Pod, grace int64) *v1.Pod {
	pod.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	pod.DeletionGracePeriodSeconds = &grace
	return pod
}

func methodsEqual(t *testing.T, what string, got, want []podworkerstest.Method) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: calls %v, want %v", what, got, want)
	}
}

func TestUpdatePodParallel(t *testing.T) {
	h := newHarness(t, nil)
	const n = 20
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			h.create(newNamedPod(strconv.Itoa(j), "ns", strconv.Itoa(i), false))
		}
	}
	h.p.WaitIdle()
	for i := 0; i < n; i++ {
		calls := h.s.CallsFor(types.UID(strconv.Itoa(i)))
		if len(calls) < 1 || len(calls) > i+1 {
			t.Errorf("pod %d synced %d times, want 1..%d", i, len(calls), i+1)
			continue
		}
		if last := calls[len(calls)-1]; last.Name != strconv.Itoa(i) {
			t.Errorf("pod %d: the latest update was not delivered last: %+v", i, calls)
		}
	}
}

func TestUpdatePod(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(h *harness)
		run     func(h *harness)
		check   func(t *testing.T, h *harness, st *podworkers.StatusView)
		calls   []podworkerstest.Method
	}{
		{
			name: "a new pod is recorded and started",
			run:  func(h *harness) { h.create(newNamedPod("1", "ns", "running-pod", false)) },
			check: func(t *testing.T, h *harness, st *podworkers.StatusView) {
				if st.StartedAt.IsZero() || !st.TerminatingAt.IsZero() || st.Working || st.Fullname != "running-pod_ns" {
					t.Errorf("unexpected status %+v", st)
				}
				if st.Active == nil || st.Active.Pod.Name != "running-pod" {
					t.Errorf("active update %+v", st.Active)
				}
				if c := h.s.CallsFor("1")[0]; c.UpdateType != podworkers.SyncPodCreate {
					t.Errorf("update type %v, want create", c.UpdateType)
				}
			},
			calls: []podworkerstest.Method{mSync},
		},
		{
			name: "a create while terminating the same UID requests a restart and is not synced",
			run: func(h *harness) {
				h.create(newNamedPod("1", "ns", "running-pod", false))
				h.p.WaitIdle()
				h.holds.Hold("1")
				h.kill(newNamedPod("1", "ns", "running-pod", false))
				updated := newNamedPod("1", "ns", "running-pod", false)
				updated.Labels = map[string]string{"updated": "value"}
				h.create(updated)
				h.holds.Release("1")
			},
			check: func(t *testing.T, h *harness, st *podworkers.StatusView) {
				if !st.RestartRequested || !st.Finished || st.GracePeriod != 30 || st.Deleted {
					t.Errorf("unexpected status %+v", st)
				}
				if st.Active.Pod.Labels != nil {
					t.Errorf("the restarted pod's spec leaked into the terminating one: %v", st.Active.Pod.Labels)
				}
				if !h.p.IsPodKnownTerminated("1") {
					t.Error("pod not known terminated")
				}
			},
			calls: []podworkerstest.Method{mSync, mTerminating, mTerminated},
		},
		{
			name: "a running pod given with a pod is ignored",
			run: func(h *harness) {
				h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate,
					Pod: newNamedPod("1", "ns", "running-pod", false), RunningPod: &runtime.Pod{ID: "1", Name: "orphaned-pod", Namespace: "ns"}})
			},
			check: func(t *testing.T, h *harness, st *podworkers.StatusView) {
				if st.Active.RunningPod != nil || st.Active.Pod.Name != "running-pod" || st.ObservedRuntime {
					t.Errorf("unexpected active update %+v", st.Active)
				}
			},
			calls: []podworkerstest.Method{mSync},
		},
		{
			name: "a running pod is terminated when an update carries a deletion timestamp",
			prepare: func(h *harness) {
				h.create(newNamedPod("1", "ns", "running-pod", false))
				h.p.WaitIdle()
			},
			run: func(h *harness) { h.upd(withDeletion(newNamedPod("1", "ns", "running-pod", false), 15)) },
			check: func(t *testing.T, h *harness, st *podworkers.StatusView) {
				if !st.Deleted || !st.Finished || st.GracePeriod != 15 || !st.StartedTerminating {
					t.Errorf("unexpected status %+v", st)
				}
				if g := h.s.CallsFor("1")[1].GracePeriod; g != 15 {
					t.Errorf("SyncTerminatingPod grace period %d, want 15", g)
				}
				if !h.p.ShouldPodContentBeRemoved("1") {
					t.Error("content of a deleted, terminated pod should be removed")
				}
			},
			calls: []podworkerstest.Method{mSync, mTerminating, mTerminated},
		},
		{
			name: "a running pod is terminated when an eviction is requested",
			prepare: func(h *harness) {
				h.create(newNamedPod("1", "ns", "running-pod", false))
				h.p.WaitIdle()
			},
			run: func(h *harness) {
				h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill,
					Pod: newNamedPod("1", "ns", "running-pod", false), KillPodOptions: &podworkers.KillPodOptions{Evict: true}})
			},
			check: func(t *testing.T, h *harness, st *podworkers.StatusView) {
				if !st.Evicted || st.Deleted || !st.Finished || st.GracePeriod != 30 {
					t.Errorf("unexpected status %+v", st)
				}
				if !st.Active.KillPodOptions.Evict {
					t.Error("active kill options lost the eviction")
				}
				if !h.p.ShouldPodContentBeRemoved("1") {
					t.Error("content of an evicted pod should be removed")
				}
			},
			calls: []podworkerstest.Method{mSync, mTerminating, mTerminated},
		},
		{
			name: "a terminal pod never started is terminated if the runtime has no cached state of it",
			prepare: func(h *harness) {
				h.cache.Set("1", nil, context.DeadlineExceeded, time.Unix(1, 0))
			},
			run: func(h *harness) {
				h.holds.Hold("1")
				h.create(withPhase(newNamedPod("1", "ns", "done-pod", false), v1.PodSucceeded))
				// the workers then see the runtime's status
				h.cache.Set("1", &runtime.PodStatus{ID: "1"}, nil, time.Unix(2, 0))
				h.holds.Release("1")
			},
			check: func(t *testing.T, h *harness, st *podworkers.StatusView) {
				if !st.Finished || !st.StartedTerminating || st.GracePeriod != 30 || st.RestartRequested {
					t.Errorf("unexpected status %+v", st)
				}
			},
			calls: []podworkerstest.Method{mTerminating, mTerminated},
		},
		{
			name: "a terminal pod never started only cleans up if the runtime shows it stopped",
			prepare: func(h *harness) {
				h.cache.Set("1", &runtime.PodStatus{ID: "1"}, nil, time.Unix(1, 0))
			},
			run: func(h *harness) { h.create(withPhase(newNamedPod("1", "ns", "done-pod", false), v1.PodSucceeded)) },
			check: func(t *testing.T, h *harness, st *podworkers.StatusView) {
				if !st.Finished || st.RestartRequested || st.TerminatedAt.IsZero() {
					t.Errorf("unexpected status %+v", st)
				}
			},
			calls: []podworkerstest.Method{mTerminated},
		},
		{
			name: "an orphaned running pod is terminated with grace 1 and then forgotten",
			run: func(h *harness) {
				h.holds.Hold("1")
				h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill,
					RunningPod: &runtime.Pod{ID: "1", Name: "orphaned-pod", Namespace: "ns"}})
				st := h.p.Status("1")
				if st == nil || !st.Deleted || !st.ObservedRuntime || st.GracePeriod != 1 || !st.Working ||
					*st.Pending.KillPodOptions.GracePeriodSecondsOverride != 1 || st.Fullname != "orphaned-pod_ns" {
					h.t.Errorf("unexpected status before the worker ran: %+v", st)
				}
				h.holds.Release("1")
			},
			check: func(t *testing.T, h *harness, st *podworkers.StatusView) {
				if st != nil {
					t.Errorf("a terminated orphan should be forgotten, have %+v", st)
				}
				if h.p.IsPodKnownTerminated("1") {
					t.Error("a forgotten orphan is not known terminated")
				}
			},
			calls: []podworkerstest.Method{mRuntime},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			if tc.prepare != nil {
				tc.prepare(h)
			}
			tc.run(h)
			h.p.WaitIdle()
			tc.check(t, h, h.p.Status("1"))
			methodsEqual(t, "pod 1", h.s.Methods("1"), tc.calls)
		})
	}
}

func TestUpdatePodRejectsBadInput(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		name string
		o    podworkers.UpdatePodOptions
	}{
		{"an update without pod is rejected", podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodUpdate}},
		{"a runtime pod with a create is rejected", podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate,
			RunningPod: &runtime.Pod{ID: "1", Name: "1", Namespace: "test"}}},
		{"a pod without UID is rejected", podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: newNamedPod("", "ns", "x", false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := h.p.UpdatePod(tc.o); err == nil {
				t.Fatal("UpdatePod accepted bad input")
			}
		})
	}
	h.p.WaitIdle()
	if len(h.s.Calls()) != 0 || h.p.Tracked() != 0 {
		t.Errorf("bad input disturbed the workers: calls %v, tracked %d", h.s.Calls(), h.p.Tracked())
	}
}

func TestUpdatePodForRuntimePod(t *testing.T) {
	h := newHarness(t, nil)
	rp := &runtime.Pod{ID: "1", Name: "1", Namespace: "test"}
	h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, RunningPod: rp})
	h.p.WaitIdle()
	calls := h.s.Calls()
	if len(calls) != 1 || calls[0].Method != mRuntime || calls[0].RunningPod != rp || calls[0].Name != "1" {
		t.Fatalf("unexpected calls %+v", calls)
	}
}

func TestUpdatePodForTerminatedRuntimePod(t *testing.T) {
	h := newHarness(t, nil)
	pod := newNamedPod("1", "test", "1", false)
	h.s.SetError(mTerminated, "1", context.DeadlineExceeded) // stay terminated, not finished
	h.create(pod)
	h.p.WaitIdle()
	h.kill(pod)
	h.p.WaitIdle()
	before := len(h.s.Calls())
	if !h.p.IsPodKnownTerminated("1") {
		t.Fatal("pod should be terminated")
	}
	h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, RunningPod: &runtime.Pod{ID: "1", Name: "1", Namespace: "test"}})
	h.p.WaitIdle()
	if got := h.s.Calls()[before:]; len(got) != 0 {
		t.Fatalf("a runtime kill of a terminated pod was acted on: %+v", got)
	}
}

func TestUpdatePodDoesNotForgetSyncPodKill(t *testing.T) {
	h := newHarness(t, nil)
	const n = 20
	for i := 0; i < n; i++ {
		pod := newNamedPod(strconv.Itoa(i), "ns", strconv.Itoa(i), false)
		h.create(pod)
		h.kill(pod)
		h.upd(pod)
	}
	h.p.WaitIdle()
	for i := 0; i < n; i++ {
		uid := types.UID(strconv.Itoa(i))
		got := h.s.Methods(uid)
		short := []podworkerstest.Method{mTerminating, mTerminated}
		long := []podworkerstest.Method{mSync, mTerminating, mTerminated}
		if !reflect.DeepEqual(got, short) && !reflect.DeepEqual(got, long) {
			t.Errorf("pod %d: the kill was lost: %v", i, got)
		}
		for _, c := range h.s.CallsFor(uid) {
			if c.Method == mTerminating && c.GracePeriod != 30 {
				t.Errorf("pod %d: grace period %d, want 30", i, c.GracePeriod)
			}
		}
	}
}

func TestTerminalPhaseTransition(t *testing.T) {
	h := newHarness(t, nil)
	pod := func() *v1.Pod { return newNamedPod("1", "test1", "pod1", false) }
	h.upd(pod())
	h.p.WaitIdle()
	if h.p.IsPodKnownTerminated("1") || h.p.IsPodTerminationRequested("1") {
		t.Fatal("pod should be running")
	}
	h.upd(pod())
	h.p.WaitIdle()
	if h.p.IsPodTerminationRequested("1") {
		t.Fatal("pod should still be running")
	}
	h.s.SetTerminal("1")
	h.upd(pod())
	h.p.WaitIdle()
	if !h.p.IsPodTerminationRequested("1") || !h.p.IsPodKnownTerminated("1") {
		t.Fatalf("a pod whose sync reports it terminal should terminate: %+v", h.p.Status("1"))
	}
	methodsEqual(t, "pod 1", h.s.Methods("1"), []podworkerstest.Method{mSync, mSync, mSync, mTerminating, mTerminated})
}

func sortedUIDs(m map[types.UID]bool) []string {
	var out []string
	for k := range m {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

func expectStatic(t *testing.T, p *podworkers.PodWorkers, started map[string]types.UID, waiting map[string][]types.UID) {
	t.Helper()
	s, w := p.StaticPods()
	if !reflect.DeepEqual(s, started) {
		t.Fatalf("started static pods %v, want %v", s, started)
	}
	if !reflect.DeepEqual(w, waiting) {
		t.Fatalf("waiting static pods %v, want %v", w, waiting)
	}
}

func TestStaticPodExclusion(t *testing.T) {
	h := newHarness(t, nil)
	p := h.p
	pod := func(uid string, static bool) *v1.Pod { return newNamedPod(uid, "test1", "pod1", static) }
	syncs := func(uid types.UID) []podworkerstest.Method { return h.s.Methods(uid) }
	one := []podworkerstest.Method{mSync}

	// a static and an apiserver pod of the same name both start
	h.upd(pod("1-normal", false))
	h.upd(pod("2-static", true))
	p.WaitIdle()
	methodsEqual(t, "2-static", syncs("2-static"), one)
	methodsEqual(t, "1-normal", syncs("1-normal"), one)
	expectStatic(t, p, map[string]types.UID{"pod1_test1": "2-static"}, map[string][]types.UID{})

	// two more static pods of that name wait, in order
	h.upd(pod("3-static", true))
	h.upd(pod("4-static", true))
	p.WaitIdle()
	methodsEqual(t, "3-static", syncs("3-static"), nil)
	methodsEqual(t, "4-static", syncs("4-static"), nil)
	expectStatic(t, p, map[string]types.UID{"pod1_test1": "2-static"}, map[string][]types.UID{"pod1_test1": {"3-static", "4-static"}})
	if got := sortedUIDs(h.q.TakeSet()); !reflect.DeepEqual(got, []string{"1-normal", "2-static", "3-static", "4-static"}) {
		t.Fatalf("queued %v, want every pod", got)
	}

	// a waiting pod that is synced again stays waiting and is requeued
	h.upd(pod("3-static", true))
	p.WaitIdle()
	expectStatic(t, p, map[string]types.UID{"pod1_test1": "2-static"}, map[string][]types.UID{"pod1_test1": {"3-static", "4-static"}})
	if got := sortedUIDs(h.q.TakeSet()); !reflect.DeepEqual(got, []string{"3-static"}) {
		t.Fatalf("queued %v, want 3-static for a retry", got)
	}

	// a waiting pod killed before it started finishes without any sync
	h.kill(pod("3-static", true))
	p.WaitIdle()
	if !p.IsPodKnownTerminated("3-static") {
		t.Fatal("3-static should be terminated")
	}
	methodsEqual(t, "3-static", syncs("3-static"), nil)
	if got := h.q.TakeSet(); len(got) != 0 {
		t.Fatalf("queued %v, want nothing for a finished worker", got)
	}
	expectStatic(t, p, map[string]types.UID{"pod1_test1": "2-static"}, map[string][]types.UID{"pod1_test1": {"3-static", "4-static"}})

	// terminating the started pod frees the name
	h.kill(pod("2-static", true))
	p.WaitIdle()
	if !p.IsPodKnownTerminated("2-static") {
		t.Fatal("2-static should be terminated")
	}
	expectStatic(t, p, map[string]types.UID{}, map[string][]types.UID{"pod1_test1": {"3-static", "4-static"}})

	// the next sync of 4-static starts it, skipping the terminated 3-static
	h.upd(pod("4-static", true))
	p.WaitIdle()
	expectStatic(t, p, map[string]types.UID{"pod1_test1": "4-static"}, map[string][]types.UID{})
	methodsEqual(t, "4-static", syncs("4-static"), one)

	state := p.SyncKnownPods([]*v1.Pod{pod("1-normal", false), pod("2-static", true), pod("3-static", true), pod("4-static", true)})
	p.WaitIdle()
	want := map[types.UID]podworkers.KnownPod{
		"1-normal": {State: podworkers.StateSyncing, HasConfig: true},
		"2-static": {State: podworkers.StateTerminated, HasConfig: true, Static: true},
		"3-static": {State: podworkers.StateTerminated}, // never started: no config taken
		"4-static": {State: podworkers.StateSyncing, HasConfig: true, Static: true},
	}
	if !reflect.DeepEqual(state, want) {
		t.Fatalf("SyncKnownPods = %v, want %v", state, want)
	}
	if st := p.Status("3-static"); st == nil || !st.Finished || st.Working {
		t.Fatalf("3-static is still desired and must be remembered: %+v", st)
	}

	state = p.SyncKnownPods([]*v1.Pod{pod("1-normal", false), pod("2-static", true), pod("4-static", true)})
	p.WaitIdle()
	delete(want, "3-static")
	if !reflect.DeepEqual(state, want) {
		t.Fatalf("SyncKnownPods = %v, want %v", state, want)
	}
	if st := p.Status("3-static"); st != nil {
		t.Fatalf("3-static is no longer desired and must be forgotten: %+v", st)
	}

	// 5-static is killed but its worker does not see it yet; 6-static waits
	h.upd(pod("5-static", true))
	p.WaitIdle()
	h.holds.Hold("5-static")
	h.kill(pod("5-static", true))
	h.upd(pod("6-static", true))
	p.WaitIdle("5-static")
	if st := p.Status("5-static"); st.TerminatingAt.IsZero() || !st.TerminatedAt.IsZero() {
		t.Fatalf("5-static should be terminating: %+v", st)
	}
	expectStatic(t, p, map[string]types.UID{"pod1_test1": "4-static"}, map[string][]types.UID{"pod1_test1": {"5-static", "6-static"}})

	// once 4-static terminates, 6-static starts ahead of the killed 5-static
	h.kill(pod("4-static", true))
	p.WaitIdle("5-static")
	h.upd(pod("6-static", true))
	p.WaitIdle("5-static")
	expectStatic(t, p, map[string]types.UID{"pod1_test1": "6-static"}, map[string][]types.UID{})
	methodsEqual(t, "6-static", syncs("6-static"), one)

	// 5-static finishes without ever running
	h.holds.Release("5-static")
	p.WaitIdle()
	if !p.IsPodKnownTerminated("5-static") {
		t.Fatalf("5-static should be terminated: %+v", p.Status("5-static"))
	}
	methodsEqual(t, "5-static", syncs("5-static"), nil)

	// three more wait; 6-static is killed and created again; 8-static's sync
	// must not jump the line ahead of 7-static
	h.upd(pod("7-static", true))
	h.upd(pod("8-static", true))
	h.upd(pod("9-static", true))
	p.WaitIdle()
	h.kill(pod("6-static", true))
	p.WaitIdle()
	h.create(pod("6-static", true))
	p.WaitIdle()
	h.upd(pod("8-static", true))
	p.WaitIdle()
	if st := p.Status("6-static"); !st.RestartRequested {
		t.Fatalf("6-static should be marked for restart: %+v", st)
	}
	expectStatic(t, p, map[string]types.UID{}, map[string][]types.UID{"pod1_test1": {"7-static", "8-static", "9-static"}})
	for _, uid := range []types.UID{"7-static", "8-static", "9-static"} {
		methodsEqual(t, string(uid), syncs(uid), nil)
	}

	// killing 7-static lets 8-static start
	h.kill(pod("7-static", true))
	p.WaitIdle()
	h.upd(pod("8-static", true))
	p.WaitIdle()
	methodsEqual(t, "8-static", syncs("8-static"), one)

	state = p.SyncKnownPods([]*v1.Pod{pod("8-static", true)})
	p.WaitIdle()
	want = map[types.UID]podworkers.KnownPod{
		"8-static": {State: podworkers.StateSyncing, HasConfig: true, Static: true},
		// 1-normal and 9-static are orphans now: 1-normal ran and is being
		// terminated, 9-static never started and is forgotten
		"1-normal": {State: podworkers.StateTerminating, Orphan: true, HasConfig: true},
	}
	if !reflect.DeepEqual(state, want) {
		t.Fatalf("SyncKnownPods = %v, want %v", state, want)
	}
	methodsEqual(t, "1-normal", syncs("1-normal"), []podworkerstest.Method{mSync, mTerminating, mTerminated})
}

func TestSyncKnownPods(t *testing.T) {
	h := newHarness(t, nil)
	p := h.p
	const n = 20
	for i := 0; i < n; i++ {
		h.upd(newNamedPod(strconv.Itoa(i), "ns", "name", false))
	}
	p.WaitIdle()
	if got, tracked := p.RunningWorkers(), p.Tracked(); got != 0 || tracked != n {
		t.Fatalf("%d workers running for %d pods, want none: an idle pod holds no goroutine", got, tracked)
	}
	desired := map[types.UID]bool{"2": true, "14": true}
	desiredPods := []*v1.Pod{newNamedPod("2", "ns", "name", false), newNamedPod("14", "ns", "name", false)}

	for i := 0; i < n; i++ {
		pod := newNamedPod(strconv.Itoa(i), "ns", "name", false)
		if desired[pod.UID] {
			continue
		}
		if i%2 == 0 {
			now := metav1.Now()
			pod.DeletionTimestamp = &now
		}
		h.kill(pod)
	}
	p.WaitIdle()

	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{"a killed pod's containers are terminating", p.ShouldPodContainersBeTerminating("0"), true},
		{"a killed pod's containers are terminating (not deleted)", p.ShouldPodContainersBeTerminating("1"), true},
		{"a desired pod's containers are not terminating", p.ShouldPodContainersBeTerminating("2"), false},
		{"a killed pod's termination is requested", p.IsPodTerminationRequested("0"), true},
		{"a desired pod's termination is not requested", p.IsPodTerminationRequested("2"), false},
		{"a terminated pod has no running containers", p.CouldHaveRunningContainers("0"), false},
		{"a terminated pod has no running containers (not deleted)", p.CouldHaveRunningContainers("1"), false},
		{"a desired pod may have running containers", p.CouldHaveRunningContainers("2"), true},
		{"a deleted, terminated pod's content goes", p.ShouldPodContentBeRemoved("0"), true},
		{"a terminated pod not deleted keeps its content", p.ShouldPodContentBeRemoved("1"), false},
		{"a running pod keeps its content", p.ShouldPodContentBeRemoved("2"), false},
		{"an unknown pod is not terminating before the first sync", p.ShouldPodContainersBeTerminating("abc"), false},
		{"an unknown pod may run before the first sync", p.CouldHaveRunningContainers("abc"), true},
		{"an unknown pod keeps content before the first sync", p.ShouldPodContentBeRemoved("abc"), false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v", tc.name, tc.got)
		}
	}

	p.SyncKnownPods(desiredPods)
	if got := p.Tracked(); got != 2 {
		t.Errorf("tracked %d, want the 2 desired pods", got)
	}
	if p.IsPodTerminationRequested("2") {
		t.Error("a desired pod must not be terminated by SyncKnownPods")
	}
	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{"an unknown pod is terminating after the first sync", p.ShouldPodContainersBeTerminating("abc"), true},
		{"an unknown pod runs nothing after the first sync", p.CouldHaveRunningContainers("abc"), false},
		{"an unknown pod's content goes after the first sync", p.ShouldPodContentBeRemoved("abc"), true},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v", tc.name, tc.got)
		}
	}

	// running pods no longer desired are terminated by their workers, not dropped
	p.SyncKnownPods(nil)
	p.WaitIdle()
	if got := p.Tracked(); got != 2 {
		t.Errorf("tracked %d, want the 2 orphans still remembered", got)
	}
	for uid := range desired {
		methodsEqual(t, string(uid), h.s.Methods(uid), []podworkerstest.Method{mSync, mTerminating, mTerminated})
	}
	p.SyncKnownPods(nil)
	if got, running := p.Tracked(), p.RunningWorkers(); got != 0 || running != 0 {
		t.Errorf("tracked %d, running %d, want all forgotten", got, running)
	}
}
