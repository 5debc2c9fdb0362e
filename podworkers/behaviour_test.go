package podworkers_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/podworkers/podworkerstest"
	"github.com/nodekit/nodekit/runtime"
)

// The kubelet's #107733 and #107900: a static pod whose manifest changes
// quickly (each change a new UID) must start once the old instance is gone,
// even if intermediate instances were killed or forgotten before they ran.
func TestRapidlyUpdatedStaticPodStarts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		middle func(h *harness, pod func(string) *v1.Pod)
	}{
		{
			name: "an intermediate instance killed before it started does not block the newest",
			middle: func(h *harness, pod func(string) *v1.Pod) {
				h.upd(pod("v2"))
				h.kill(pod("v2"))
			},
		},
		{
			name: "an intermediate instance forgotten by SyncKnownPods does not block the newest",
			middle: func(h *harness, pod func(string) *v1.Pod) {
				h.upd(pod("v2"))
				h.p.WaitIdle("v1")
				h.p.SyncKnownPods([]*v1.Pod{pod("v1"), pod("v3")}) // v2 gone from the source
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			pod := func(uid string) *v1.Pod { return newNamedPod(uid, "kube-system", "etcd", true) }
			h.upd(pod("v1"))
			h.p.WaitIdle()
			// the manifest changes twice in quick succession, while v1 is
			// still stopping
			h.holds.Hold("v1")
			h.kill(pod("v1"))
			tc.middle(h, pod)
			h.upd(pod("v3"))
			h.p.WaitIdle("v1")
			h.holds.Release("v1")
			h.p.WaitIdle()
			if !h.p.IsPodKnownTerminated("v1") {
				t.Fatal("v1 should have terminated")
			}
			// v3 was refused while v1 was still terminating; its retry
			// comes from the work queue, as the sync loop would send it
			for it := range h.q.TakeSet() {
				if it == "v3" {
					h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: pod("v3")})
				}
			}
			h.p.WaitIdle()
			if got := h.s.Methods("v3"); len(got) == 0 || got[0] != mSync {
				t.Fatalf("the newest static pod never started: %v (status %+v)", got, h.p.Status("v3"))
			}
			if got := h.s.Methods("v2"); len(got) != 0 {
				t.Errorf("the intermediate instance ran: %v", got)
			}
			started, _ := h.p.StaticPods()
			if started["etcd_kube-system"] != "v3" {
				t.Errorf("started static pods %v, want v3", started)
			}
		})
	}
}

// A static pod recreated with the same UID (a fixed UID in the manifest)
// starts again once the old instance finished and was forgotten.
func TestStaticPodWithReusedUIDRestarts(t *testing.T) {
	h := newHarness(t, nil)
	pod := newNamedPod("fixed", "kube-system", "etcd", true)
	h.create(pod)
	h.p.WaitIdle()
	h.kill(pod)
	h.create(pod) // the manifest came back
	h.p.WaitIdle()
	known := h.p.SyncKnownPods([]*v1.Pod{pod})
	if _, ok := known["fixed"]; ok {
		t.Fatalf("a finished pod with a restart request should be forgotten: %v", known)
	}
	h.create(pod) // housekeeping re-adds desired pods missing from known
	h.p.WaitIdle()
	methodsEqual(t, "fixed", h.s.Methods("fixed"), []podworkerstest.Method{mSync, mTerminating, mTerminated, mSync})
}

// The kubelet's #113145: a pod force-deleted (gone from the source without
// any kill) must still be terminated and finished, whatever state its worker
// was in.
func TestForceDeletedPodIsNotStuckTerminating(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *harness, pod *v1.Pod)
		want  []podworkerstest.Method
	}{
		{
			name:  "a running pod removed from config is terminated",
			setup: func(h *harness, pod *v1.Pod) {},
			want:  []podworkerstest.Method{mSync, mTerminating, mTerminated},
		},
		{
			name: "a pod whose graceful termination failed is retried to completion",
			setup: func(h *harness, pod *v1.Pod) {
				h.s.SetError(mTerminating, pod.UID, errors.New("runtime hiccup"))
				h.upd(withDeletion(pod.DeepCopy(), 30))
				h.p.WaitIdle()
				h.s.SetError(mTerminating, pod.UID, nil)
			},
			want: []podworkerstest.Method{mSync, mTerminating, mTerminating, mTerminated},
		},
		{
			name: "a terminated pod whose cleanup failed is retried to completion",
			setup: func(h *harness, pod *v1.Pod) {
				h.s.SetError(mTerminated, pod.UID, errors.New("volume busy"))
				h.upd(withDeletion(pod.DeepCopy(), 30))
				h.p.WaitIdle()
				h.s.SetError(mTerminated, pod.UID, nil)
			},
			want: []podworkerstest.Method{mSync, mTerminating, mTerminated, mTerminated},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			pod := newNamedPod("1", "ns", "web", false)
			h.upd(pod)
			h.p.WaitIdle()
			tc.setup(h, pod)
			// force deletion: the pod simply vanishes from the desired set
			known := h.p.SyncKnownPods(nil)
			if k, ok := known["1"]; !ok || !k.Orphan {
				t.Fatalf("the unfinished orphan should still be reported: %v", known)
			}
			h.p.WaitIdle()
			methodsEqual(t, "1", h.s.Methods("1"), tc.want)
			if !h.p.ShouldPodContentBeRemoved("1") {
				t.Error("a force-deleted, terminated pod's content should be removed")
			}
			if known := h.p.SyncKnownPods(nil); len(known) != 0 {
				t.Errorf("the finished orphan should be forgotten: %v", known)
			}
		})
	}
}

func TestRequeueDelays(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		terminal bool
		min, max time.Duration
	}{
		{name: "a successful sync is due again after the resync interval plus jitter", min: time.Minute, max: 90 * time.Second},
		{name: "a failed sync backs off", err: errors.New("boom"), min: 10 * time.Second, max: 15 * time.Second},
		{name: "a transient failure retries sooner", err: fmt.Errorf("network not ready: %w", podworkers.ErrTransient), min: time.Second, max: 1500 * time.Millisecond},
		{name: "a failure that says when to retry is due then, without jitter",
			err: podworkers.RetryAfter(fmt.Errorf("back-off: %w", podworkers.ErrTransient), 7*time.Second), min: 7 * time.Second, max: 7 * time.Second},
		{name: "a retry time wrapped further is still seen",
			err: fmt.Errorf("sync: %w", podworkers.RetryAfter(errors.New("back-off"), 3*time.Second)), min: 3 * time.Second, max: 3 * time.Second},
		{name: "a retry later than the resync interval is due at the resync interval",
			err: podworkers.RetryAfter(errors.New("back-off 5m"), 5*time.Minute), min: time.Minute, max: time.Minute},
		{name: "a retry time in the past is due at once",
			err: podworkers.RetryAfter(errors.New("back-off over"), -time.Second), min: 0, max: 0},
		{name: "a terminal pod moves on at once", terminal: true, min: 0, max: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.s.SetError(mSync, "1", tc.err)
			if tc.terminal {
				h.s.SetTerminal("1")
			}
			h.upd(newNamedPod("1", "ns", "p", false))
			h.p.WaitIdle()
			items := h.q.Take()
			if len(items) == 0 {
				t.Fatal("nothing queued")
			}
			if d := items[0].Delay; d < tc.min || d > tc.max {
				t.Errorf("delay %v, want within [%v, %v]", d, tc.min, tc.max)
			}
		})
	}
}

func TestSyncerPanicIsAnError(t *testing.T) {
	h := newHarness(t, nil)
	calls := 0
	h.s.SyncPodFn = func(context.Context, podworkers.UpdateType, *v1.Pod, *v1.Pod, *runtime.PodStatus) (bool, error) {
		calls++
		if calls == 1 {
			panic("syncer bug")
		}
		return false, nil
	}
	h.upd(newNamedPod("1", "ns", "p", false))
	h.p.WaitIdle()
	if items := h.q.Take(); len(items) != 1 || items[0].Delay < 10*time.Second {
		t.Fatalf("a panicking sync should back off like an error: %+v", items)
	}
	h.upd(newNamedPod("1", "ns", "p", false))
	h.p.WaitIdle()
	if calls != 2 {
		t.Fatalf("the worker should survive the panic and sync again, calls %d", calls)
	}
}

func TestWorkerWaitsForNewerRuntimeStatus(t *testing.T) {
	cache := runtime.NewCache()
	clk := clocktesting.NewFakePassiveClock(time.Unix(100, 0))
	h := newHarness(t, func(c *podworkers.Config) { c.Cache = cache; c.Clock = clk })
	pod := newNamedPod("1", "ns", "p", false)

	cache.UpdateTime(time.Unix(100, 1)) // the first relist
	h.upd(pod)
	h.p.WaitIdle()
	if got := len(h.s.Calls()); got != 1 {
		t.Fatalf("first sync: %d calls", got)
	}

	// the second update must wait for status observed after the first sync
	done := h.s.WaitCalls(2)
	h.upd(pod)
	select {
	case <-done:
		t.Fatal("the worker synced on status older than its previous sync")
	default:
	}
	fresh := &runtime.PodStatus{ID: "1", Name: "p", Namespace: "ns"}
	cache.Set("1", fresh, nil, time.Unix(101, 0))
	<-done
	h.p.WaitIdle()
	if got := h.s.Calls()[1].Status; got != fresh {
		t.Errorf("the sync got status %+v, want the fresh one", got)
	}
}

func TestShorterGracePeriodCancelsTermination(t *testing.T) {
	h := newHarness(t, nil)
	entered := make(chan int64, 4)
	h.s.SyncTerminatingPodFn = func(ctx context.Context, _ *v1.Pod, _ *runtime.PodStatus, grace *int64, _ func(*v1.PodStatus)) error {
		entered <- *grace
		if *grace > 5 {
			<-ctx.Done() // a long graceful stop in progress
			return ctx.Err()
		}
		return nil
	}
	pod := newNamedPod("1", "ns", "p", false)
	h.upd(pod)
	h.p.WaitIdle()
	h.kill(pod)
	if g := <-entered; g != 30 {
		t.Fatalf("first grace period %d, want 30", g)
	}
	two := int64(2)
	h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: pod,
		KillPodOptions: &podworkers.KillPodOptions{GracePeriodSecondsOverride: &two}})
	if g := <-entered; g != 2 {
		t.Fatalf("after the shorter kill, grace period %d, want 2", g)
	}
	h.p.WaitIdle()
	if !h.p.IsPodKnownTerminated("1") {
		t.Fatal("pod should have terminated with the shorter grace period")
	}
	// a longer override afterwards changes nothing
	if st := h.p.Status("1"); st.GracePeriod != 2 {
		t.Errorf("grace period %d, want 2", st.GracePeriod)
	}
}

func TestMirrorPodAndKillOptionsCarryOver(t *testing.T) {
	h := newHarness(t, nil)
	pod := newNamedPod("1", "ns", "static", true)
	mirror := newNamedPod("m1", "ns", "static", false)
	h.holds.Hold("1")
	h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod, MirrorPod: mirror})
	h.upd(pod) // no mirror pod given: the pending one carries over
	h.holds.Release("1")
	h.p.WaitIdle()
	calls := h.s.CallsFor("1")
	if len(calls) != 1 || calls[0].MirrorPod != mirror {
		t.Fatalf("mirror pod lost: %+v", calls)
	}

	completed := make(chan struct{})
	var statusFnRan bool
	h.holds.Hold("1")
	h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: pod, KillPodOptions: &podworkers.KillPodOptions{
		CompletedCh:   completed,
		PodStatusFunc: func(*v1.PodStatus) { statusFnRan = true },
	}})
	h.upd(pod) // a later update must not drop the kill's options
	h.s.SyncTerminatingPodFn = func(_ context.Context, _ *v1.Pod, _ *runtime.PodStatus, _ *int64, fn func(*v1.PodStatus)) error {
		if fn != nil {
			fn(&v1.PodStatus{})
		}
		return nil
	}
	h.holds.Release("1")
	<-completed
	h.p.WaitIdle()
	if !statusFnRan {
		t.Error("the kill's status function was not handed to SyncTerminatingPod")
	}
}

func TestTerminatePodAndWait(t *testing.T) {
	h := newHarness(t, nil)
	pod := newNamedPod("1", "ns", "p", false)
	h.upd(pod)
	h.p.WaitIdle()
	if err := h.p.TerminatePodAndWait(context.Background(), pod, podworkers.KillPodOptions{Evict: true}); err != nil {
		t.Fatal(err)
	}
	if !h.p.IsPodKnownTerminated("1") {
		t.Fatal("TerminatePodAndWait returned before the pod terminated")
	}
	// on a terminated pod it returns at once
	if err := h.p.TerminatePodAndWait(context.Background(), pod, podworkers.KillPodOptions{}); err != nil {
		t.Fatal(err)
	}

	// a stop that never completes ends with the caller's context
	stuck := newNamedPod("2", "ns", "stuck", false)
	h.s.SetError(mTerminating, "2", errors.New("runtime down"))
	h.upd(stuck)
	h.p.WaitIdle()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.p.TerminatePodAndWait(ctx, stuck, podworkers.KillPodOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	h.p.WaitIdle()
}

func TestRunEndsWorkersWithItsContext(t *testing.T) {
	s := &podworkerstest.Syncer{}
	blocked := make(chan struct{})
	s.SyncPodFn = func(ctx context.Context, _ podworkers.UpdateType, _, _ *v1.Pod, _ *runtime.PodStatus) (bool, error) {
		close(blocked)
		<-ctx.Done()
		return false, ctx.Err()
	}
	p, err := podworkers.New(podworkers.Config{Syncer: s, Cache: podworkerstest.NewCache()})
	if err != nil {
		t.Fatal(err)
	}
	// updates before Run are kept and worked on once Run starts
	if err := p.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: newNamedPod("1", "ns", "p", false)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	<-blocked
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background()); err == nil {
		t.Error("a second Run should fail")
	}
	// goleak in TestMain checks that no worker is left
}

func TestStartReturnsAtOnceAndStopsWorkersWithItsContext(t *testing.T) {
	s := &podworkerstest.Syncer{}
	blocked := make(chan struct{})
	s.SyncPodFn = func(ctx context.Context, _ podworkers.UpdateType, _, _ *v1.Pod, _ *runtime.PodStatus) (bool, error) {
		close(blocked)
		<-ctx.Done()
		return false, ctx.Err()
	}
	p, err := podworkers.New(podworkers.Config{Syncer: s, Cache: podworkerstest.NewCache()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := p.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// an update after Start is worked on
	if err := p.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: newNamedPod("1", "ns", "p", false)}); err != nil {
		t.Fatal(err)
	}
	<-blocked
	select {
	case <-stopped:
		t.Fatal("stopped closed while ctx lasts")
	default:
	}
	cancel()
	<-stopped // the worker saw its sync cancelled and exited
	if _, err := p.Start(context.Background()); err == nil {
		t.Error("Start after Start should fail")
	}
	// goleak in TestMain checks that no worker is left
}

func TestQueueReturnsDuePods(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	q := podworkers.NewQueue(clk)
	q.Enqueue("a", time.Second)
	q.Enqueue("b", 3*time.Second)
	q.Enqueue("c", 0)
	if got := q.GetWork(); !reflect.DeepEqual(got, []types.UID{"c"}) {
		t.Fatalf("due at 0s: %v", got)
	}
	clk.SetTime(time.Unix(1, 0))
	if got := q.GetWork(); !reflect.DeepEqual(got, []types.UID{"a"}) {
		t.Fatalf("due at 1s: %v", got)
	}
	q.Enqueue("b", 10*time.Second) // a later decision replaces the earlier
	clk.SetTime(time.Unix(5, 0))
	if got := q.GetWork(); len(got) != 0 || q.Len() != 1 {
		t.Fatalf("due at 5s: %v, len %d", got, q.Len())
	}
	clk.SetTime(time.Unix(11, 0))
	if got := q.GetWork(); !reflect.DeepEqual(got, []types.UID{"b"}) || q.Len() != 0 {
		t.Fatalf("due at 11s: %v", got)
	}
}

func TestMirrorPodQueriesFollowTheStaticPod(t *testing.T) {
	h := newHarness(t, nil)
	release := make(chan struct{})
	entered := make(chan struct{})
	h.s.SyncTerminatingPodFn = func(ctx context.Context, _ *v1.Pod, _ *runtime.PodStatus, _ *int64, _ func(*v1.PodStatus)) error {
		close(entered)
		<-release
		return nil
	}
	pod := newNamedPod("s1", "kube-system", "etcd", true)
	h.upd(pod)
	h.p.WaitIdle()
	if h.p.IsPodForMirrorPodTerminatingByFullName("etcd_kube-system") {
		t.Error("a running static pod is not terminating")
	}
	if h.p.ShouldPodBeFinished("s1") {
		t.Error("a running pod is not finished")
	}
	h.kill(pod)
	<-entered
	if !h.p.IsPodForMirrorPodTerminatingByFullName("etcd_kube-system") {
		t.Error("the static pod is terminating: its mirror pod must stay")
	}
	close(release)
	h.p.WaitIdle()
	if h.p.IsPodForMirrorPodTerminatingByFullName("etcd_kube-system") {
		t.Error("a terminated static pod no longer holds its mirror pod")
	}
	if !h.p.ShouldPodBeFinished("s1") {
		t.Error("a pod whose cleanup ran is finished")
	}
	if h.p.ShouldPodBeFinished("unknown") {
		t.Error("an unknown pod is not finished before the first SyncKnownPods")
	}
	h.p.SyncKnownPods(nil)
	if !h.p.ShouldPodBeFinished("unknown") {
		t.Error("an unknown pod is finished after the first SyncKnownPods")
	}
}
