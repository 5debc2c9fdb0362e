package podworkers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

func newInternal(t *testing.T) (*PodWorkers, *recordingQueue) {
	t.Helper()
	q := &recordingQueue{}
	p, err := New(Config{
		Syncer: nopSyncer{}, Cache: runtime.NewCache(), ResyncQueue: q,
		Clock: clocktesting.NewFakePassiveClock(time.Unix(1, 0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, q
}

func staticPod(uid, name string) *v1.Pod {
	thirty := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			UID: types.UID(uid), Name: name,
			Annotations: map[string]string{podutil.ConfigSourceAnnotationKey: podutil.FileSource},
		},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &thirty},
	}
}

func plainPod(uid, ns, name string) *v1.Pod {
	thirty := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: ns, Name: name},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: &thirty},
	}
}

func TestAllowPodStart(t *testing.T) {
	now := time.Unix(10, 0)
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		statuses    map[types.UID]*podSyncStatus
		started     map[string]types.UID
		waiting     map[string][]types.UID
		wantStarted map[string]types.UID
		wantWaiting map[string][]types.UID
		allowed     bool
		allowedEver bool
		requeued    bool
	}{
		{
			name:        "a non-static pod starts even when another pod has its full name",
			pod:         plainPod("uid-0", "", "test"),
			statuses:    map[types.UID]*podSyncStatus{"uid-0": {fullname: "test_"}, "uid-1": {fullname: "test_"}},
			started:     map[string]types.UID{"test_": "uid-1"},
			wantStarted: map[string]types.UID{"test_": "uid-1"},
			wantWaiting: map[string][]types.UID{},
			allowed:     true, allowedEver: true,
		},
		{
			name:        "a static pod starts when no static pod of its full name runs",
			pod:         staticPod("uid-0", "foo"),
			statuses:    map[types.UID]*podSyncStatus{"uid-0": {fullname: "foo_"}, "uid-1": {fullname: "bar_"}},
			started:     map[string]types.UID{"bar_": "uid-1"},
			wantStarted: map[string]types.UID{"foo_": "uid-0", "bar_": "uid-1"},
			wantWaiting: map[string][]types.UID{},
			allowed:     true, allowedEver: true,
		},
		{
			name:        "a static pod waits while another static pod of its full name runs",
			pod:         staticPod("uid-0", "foo"),
			statuses:    map[types.UID]*podSyncStatus{"uid-0": {fullname: "foo_"}, "uid-1": {fullname: "foo_"}},
			started:     map[string]types.UID{"foo_": "uid-1"},
			wantStarted: map[string]types.UID{"foo_": "uid-1"},
			wantWaiting: map[string][]types.UID{},
			allowed:     false, allowedEver: true, requeued: true,
		},
		{
			name:        "an already started static pod may go on",
			pod:         staticPod("uid-0", "foo"),
			statuses:    map[types.UID]*podSyncStatus{"uid-0": {fullname: "foo_"}},
			started:     map[string]types.UID{"foo_": "uid-0"},
			wantStarted: map[string]types.UID{"foo_": "uid-0"},
			wantWaiting: map[string][]types.UID{},
			allowed:     true, allowedEver: true,
		},
		{
			name:        "the first waiting static pod starts and leaves the line",
			pod:         staticPod("uid-0", "foo"),
			statuses:    map[types.UID]*podSyncStatus{"uid-0": {fullname: "foo_"}},
			waiting:     map[string][]types.UID{"foo_": {"uid-0"}},
			wantStarted: map[string]types.UID{"foo_": "uid-0"},
			wantWaiting: map[string][]types.UID{},
			allowed:     true, allowedEver: true,
		},
		{
			name:        "a static pod second in line waits",
			pod:         staticPod("uid-0", "foo"),
			statuses:    map[types.UID]*podSyncStatus{"uid-0": {fullname: "foo_"}, "uid-1": {fullname: "foo_"}},
			waiting:     map[string][]types.UID{"foo_": {"uid-1", "uid-0"}},
			wantStarted: map[string]types.UID{},
			wantWaiting: map[string][]types.UID{"foo_": {"uid-1", "uid-0"}},
			allowed:     false, allowedEver: true, requeued: true,
		},
		{
			name:        "forgotten pods ahead in line are skipped and dropped",
			pod:         staticPod("uid-0", "foo"),
			statuses:    map[types.UID]*podSyncStatus{"uid-0": {fullname: "foo_"}, "uid-1": {fullname: "foo_"}},
			waiting:     map[string][]types.UID{"foo_": {"uid-2", "uid-2", "uid-3", "uid-0", "uid-1"}},
			wantStarted: map[string]types.UID{"foo_": "uid-0"},
			wantWaiting: map[string][]types.UID{"foo_": {"uid-1"}},
			allowed:     true, allowedEver: true,
		},
		{
			name: "terminating and terminated pods ahead in line are skipped",
			pod:  staticPod("uid-0", "foo"),
			statuses: map[types.UID]*podSyncStatus{
				"uid-0": {fullname: "foo_"}, "uid-1": {fullname: "foo_"},
				"uid-2": {fullname: "foo_", terminatingAt: now}, "uid-3": {fullname: "foo_", terminatedAt: now},
			},
			waiting:     map[string][]types.UID{"foo_": {"uid-2", "uid-3", "uid-0", "uid-1"}},
			wantStarted: map[string]types.UID{"foo_": "uid-0"},
			wantWaiting: map[string][]types.UID{"foo_": {"uid-1"}},
			allowed:     true, allowedEver: true,
		},
		{
			name:        "a static pod without status can never start",
			pod:         staticPod("uid-0", "foo"),
			statuses:    map[types.UID]*podSyncStatus{"uid-1": {fullname: "foo_"}},
			waiting:     map[string][]types.UID{"foo_": {"uid-1"}},
			wantStarted: map[string]types.UID{},
			wantWaiting: map[string][]types.UID{"foo_": {"uid-1"}},
			allowed:     false, allowedEver: false,
		},
		{
			name:        "a static pod asked to terminate before it started can never start",
			pod:         staticPod("uid-0", "foo"),
			statuses:    map[types.UID]*podSyncStatus{"uid-0": {fullname: "foo_", terminatingAt: now}},
			waiting:     map[string][]types.UID{"foo_": {"uid-2", "uid-0"}},
			wantStarted: map[string]types.UID{},
			wantWaiting: map[string][]types.UID{"foo_": {"uid-2", "uid-0"}},
			allowed:     false, allowedEver: false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, q := newInternal(t)
			p.statuses = tc.statuses
			if tc.started != nil {
				p.startedStatic = tc.started
			}
			if tc.waiting != nil {
				p.waitingStatic = tc.waiting
			}
			allowed, ever := p.allowPodStart(tc.pod)
			if allowed != tc.allowed || ever != tc.allowedEver {
				t.Errorf("allowPodStart = %v, %v; want %v, %v", allowed, ever, tc.allowed, tc.allowedEver)
			}
			if !reflect.DeepEqual(p.startedStatic, tc.wantStarted) {
				t.Errorf("started = %v, want %v", p.startedStatic, tc.wantStarted)
			}
			if !reflect.DeepEqual(p.waitingStatic, tc.wantWaiting) {
				t.Errorf("waiting = %v, want %v", p.waitingStatic, tc.wantWaiting)
			}
			if got := len(q.items) > 0; got != tc.requeued {
				t.Errorf("requeued = %v, want %v", got, tc.requeued)
			}
		})
	}
}

func TestRemoveTerminatedWorker(t *testing.T) {
	const uid = types.UID("pod-uid")
	named := func(n string) *UpdatePodOptions {
		return &UpdatePodOptions{Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid, Name: n}}}
	}
	for _, tc := range []struct {
		name          string
		orphan        bool
		status        *podSyncStatus
		started       map[string]types.UID
		removed       bool
		wantPending   *UpdatePodOptions
		wantTerminate bool
	}{
		{name: "a finished worker is removed", status: &podSyncStatus{finished: true}, removed: true},
		{
			name:    "a worker waiting behind another static pod is kept",
			status:  &podSyncStatus{fullname: "f"},
			started: map[string]types.UID{"f": "other"},
		},
		{name: "a desired worker not yet started is kept", status: &podSyncStatus{fullname: "f"}},
		{name: "an orphan never started is removed", status: &podSyncStatus{fullname: "f"}, orphan: true, removed: true},
		{
			name:   "an orphan seen on the runtime is kept to be terminated",
			status: &podSyncStatus{fullname: "f", observedRuntime: true}, orphan: true, wantTerminate: true,
		},
		{
			name:   "a started orphan begins terminating",
			status: &podSyncStatus{fullname: "f", startedAt: time.Unix(1, 0), activeUpdate: named("1")}, orphan: true,
			wantPending: named("1"), wantTerminate: true,
		},
		{
			name:   "a terminating orphan without an active update is kept",
			status: &podSyncStatus{fullname: "f", startedAt: time.Unix(1, 0), terminatingAt: time.Unix(2, 0)}, orphan: true,
			wantTerminate: true,
		},
		{
			name:   "a terminating orphan replays its last update",
			status: &podSyncStatus{fullname: "f", startedAt: time.Unix(1, 0), terminatingAt: time.Unix(2, 0), activeUpdate: named("1")}, orphan: true,
			wantPending: named("1"), wantTerminate: true,
		},
		{
			name: "a terminating orphan keeps its pending update",
			status: &podSyncStatus{fullname: "f", startedAt: time.Unix(1, 0), terminatingAt: time.Unix(2, 0),
				working: true, pendingUpdate: named("2"), activeUpdate: named("1")}, orphan: true,
			wantPending: named("2"), wantTerminate: true,
		},
		{
			name: "a terminated orphan replays its last update to run cleanup",
			status: &podSyncStatus{fullname: "f", startedAt: time.Unix(1, 0), terminatingAt: time.Unix(2, 0), terminatedAt: time.Unix(3, 0),
				activeUpdate: named("1")}, orphan: true,
			wantPending: named("1"), wantTerminate: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newInternal(t)
			p.statuses[uid] = tc.status
			if tc.started != nil {
				p.startedStatic = tc.started
			}
			removed := p.removeTerminatedWorker(uid, tc.status, tc.orphan)
			_, exists := p.statuses[uid]
			if removed != tc.removed || exists == tc.removed {
				t.Fatalf("removed = %v (exists %v), want %v", removed, exists, tc.removed)
			}
			if tc.removed {
				return
			}
			if !reflect.DeepEqual(tc.status.pendingUpdate, tc.wantPending) {
				t.Errorf("pending = %+v, want %+v", tc.status.pendingUpdate, tc.wantPending)
			}
			if tc.wantPending != nil && !tc.status.working {
				t.Error("the replayed update does not count as work")
			}
			if got := tc.status.IsTerminationRequested(); got != tc.wantTerminate {
				t.Errorf("termination requested = %v, want %v", got, tc.wantTerminate)
			}
			if tc.orphan && !tc.status.deleted {
				t.Error("an orphan must count as deleted")
			}
		})
	}
}

func TestCalculateEffectiveGracePeriod(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name              string
		current           int64
		spec, deletion    *int64
		override          *int64
		nilPod            bool
		want              int64
		wantShortenedFlag bool
	}{
		{name: "the spec's grace period applies without overrides", spec: i(30), want: 30},
		{name: "the deletion's grace period beats the spec", spec: i(30), deletion: i(5), want: 5},
		{name: "a shorter override beats the deletion", spec: i(30), deletion: i(5), override: i(2), want: 2},
		{name: "a zero deletion grace period becomes 1", spec: i(30), deletion: i(0), want: 1},
		{name: "a zero override becomes 1", spec: i(30), deletion: i(5), override: i(0), want: 1},
		{name: "an unset spec gets the default 30", want: 30},
		{name: "a runtime pod without spec gets 1", nilPod: true, want: 1},
		{name: "a longer override does not lengthen the grace period", current: 10, spec: i(30), override: i(20), want: 10},
		{name: "a shorter override shortens and says so", current: 10, spec: i(30), override: i(3), want: 3, wantShortenedFlag: true},
		{name: "a shorter deletion shortens and says so", current: 10, spec: i(30), deletion: i(4), want: 4, wantShortenedFlag: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pod *v1.Pod
			if !tc.nilPod {
				pod = plainPod("1", "ns", "p")
				pod.Spec.TerminationGracePeriodSeconds = tc.spec
				pod.DeletionGracePeriodSeconds = tc.deletion
			}
			got, shortened := calculateEffectiveGracePeriod(&podSyncStatus{gracePeriod: tc.current}, pod,
				&KillPodOptions{GracePeriodSecondsOverride: tc.override})
			if got != tc.want || shortened != tc.wantShortenedFlag {
				t.Errorf("got %d, %v; want %d, %v", got, shortened, tc.want, tc.wantShortenedFlag)
			}
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
	}{
		{"a config without syncer is rejected", Config{Cache: runtime.NewCache()}},
		{"a config without cache is rejected", Config{Syncer: nopSyncer{}}},
		{"a negative back-off is rejected", Config{Syncer: nopSyncer{}, Cache: runtime.NewCache(), BackOff: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.c); err == nil || !errorsIs(err, ErrInvalidConfig) {
				t.Fatalf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestReadyQueueStaysFIFOAndBounded: pods queued for a worker goroutine are
// taken in order, and a queue that never drains does not keep what was
// taken.
func TestReadyQueueStaysFIFOAndBounded(t *testing.T) {
	p, err := New(Config{Syncer: nopSyncer{}, Cache: runtime.NewCache()})
	if err != nil {
		t.Fatal(err)
	}
	p.root = context.Background() // as while Run runs; no goroutine is started here
	next, want := 0, 0
	push := func(n int) {
		p.mu.Lock()
		defer p.mu.Unlock()
		for range n {
			p.claim(types.UID(strconv.Itoa(next)), &podSyncStatus{})
			next++
		}
	}
	for round := range 1000 {
		push(3)
		for range 2 + round%2 { // takes keep up, about
			got, _, ok := p.take(false)
			if !ok {
				t.Fatalf("round %d: nothing to take", round)
			}
			if got.uid != types.UID(strconv.Itoa(want)) {
				t.Fatalf("round %d: took %s, want %d", round, got.uid, want)
			}
			want++
		}
	}
	if backlog := next - want; cap(p.ready) > 4*backlog+256 {
		t.Fatalf("queue holds %d with %d pods waiting", cap(p.ready), backlog)
	}
}

// TestSyncErrorsAreLoggedAsTheKubelets: a pod waiting out a crash-loop or
// image-pull back-off is no sync failure (the kubelet logs nothing for it);
// other errors are logged at error level.
func TestSyncErrorsAreLoggedAsTheKubelets(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		wantError bool
	}{
		{"crash-loop back-off", fmt.Errorf("%w: %w", ErrTransient, errors.Join(fmt.Errorf("StartContainer for %q failed: %w", "app", runtime.ErrCrashLoopBackOff))), false},
		{"image pull back-off", fmt.Errorf("%w: %w", ErrTransient, runtime.ErrImagePullBackOff), false},
		{"cancelled", context.Canceled, false},
		{"a failure", errors.New("sandbox refused"), true},
		{"a transient failure that is no back-off", fmt.Errorf("%w: network not ready", ErrTransient), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errorLines int
			log := funcr.New(func(_, _ string) {}, funcr.Options{})
			log = logr.New(&countErrors{LogSink: log.GetSink(), n: &errorLines})
			p, err := New(Config{Syncer: nopSyncer{}, Cache: runtime.NewCache(), Log: log})
			if err != nil {
				t.Fatal(err)
			}
			p.logSyncError(tc.err, "uid", StateSyncing)
			if got := errorLines == 1; got != tc.wantError {
				t.Fatalf("logged %d error lines, want error %v", errorLines, tc.wantError)
			}
		})
	}
}

type countErrors struct {
	logr.LogSink
	n *int
}

func (c *countErrors) Error(err error, msg string, kv ...any) {
	*c.n++
	c.LogSink.Error(err, msg, kv...)
}
