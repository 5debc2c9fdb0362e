package pleg

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
)

const testRuntimeType = "fooRuntime"

// scriptedLister is a RuntimeLister whose answers the test sets step by step.
// GetPodStatus answers, in order of precedence: statusFn, a scripted result
// for the pod, or a status derived from the listed pod.
type scriptedLister struct {
	mu       sync.Mutex
	pods     []*runtime.Pod
	listErr  error
	statuses map[types.UID]statusResult
	statusFn func(ctx context.Context, uid types.UID) (*runtime.PodStatus, error)
	calls    []types.UID // GetPodStatus calls, in order
	lists    int
}

type statusResult struct {
	status *runtime.PodStatus
	err    error
}

func (l *scriptedLister) setPods(pods ...*runtime.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pods = pods
}

func (l *scriptedLister) setStatus(uid types.UID, s *runtime.PodStatus, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.statuses == nil {
		l.statuses = map[types.UID]statusResult{}
	}
	l.statuses[uid] = statusResult{s, err}
}

// takeCalls returns and forgets the GetPodStatus calls so far, sorted.
func (l *scriptedLister) takeCalls() []types.UID {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.calls
	l.calls = nil
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c
}

func (l *scriptedLister) GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lists++
	if l.listErr != nil {
		return nil, l.listErr
	}
	return append([]*runtime.Pod(nil), l.pods...), nil
}

func (l *scriptedLister) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
	l.mu.Lock()
	l.calls = append(l.calls, uid)
	fn := l.statusFn
	r, scripted := l.statuses[uid]
	var pod *runtime.Pod
	for _, p := range l.pods {
		if p != nil && p.ID == uid { // a script may list nil
			pod = p
		}
	}
	l.mu.Unlock()
	if fn != nil {
		return fn(ctx, uid)
	}
	if scripted {
		return r.status, r.err
	}
	return statusOf(uid, pod), nil
}

// statusOf derives a PodStatus from a listing; pod may be nil.
func statusOf(uid types.UID, pod *runtime.Pod) *runtime.PodStatus {
	s := &runtime.PodStatus{ID: uid}
	if pod == nil {
		return s
	}
	s.Name, s.Namespace = pod.Name, pod.Namespace
	for _, c := range pod.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, &runtime.ContainerStatus{ID: c.ID, Name: c.Name, State: c.State})
	}
	for _, c := range pod.Sandboxes {
		st := runtime.SandboxStateNotReady
		if c.State == runtime.ContainerStateRunning {
			st = runtime.SandboxStateReady
		}
		s.SandboxStatuses = append(s.SandboxStatuses, &runtime.SandboxStatus{ID: c.ID.ID, State: st})
	}
	return s
}

type testPLEG struct {
	*GenericPLEG
	lister *scriptedLister
	clock  *clocktesting.FakeClock
	cache  runtime.Cache
	mu     sync.Mutex
	stats  []RelistStats // one per relist
}

// newTestPLEG returns a PLEG on a scripted lister and a fake clock. mod may
// change the config.
func newTestPLEG(t *testing.T, mod func(*Config)) *testPLEG {
	t.Helper()
	tp := &testPLEG{
		lister: &scriptedLister{},
		clock:  clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		cache:  runtime.NewCache(),
	}
	c := Config{
		Runtime:              tp.lister,
		Cache:                tp.cache,
		Clock:                tp.clock,
		Log:                  logr.Discard(),
		EventChannelCapacity: 100,
		RelistPeriod:         time.Hour,
		OnRelist: func(s RelistStats) {
			tp.mu.Lock()
			defer tp.mu.Unlock()
			tp.stats = append(tp.stats, s)
		},
	}
	if mod != nil {
		mod(&c)
	}
	g, err := New(c)
	require.NoError(t, err)
	tp.GenericPLEG = g
	return tp
}

func (tp *testPLEG) relist(t *testing.T) {
	t.Helper()
	require.NoError(t, tp.Relist(context.Background()))
}

func (tp *testPLEG) lastStats() RelistStats {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.stats[len(tp.stats)-1]
}

// drain returns the events in the channel now, sorted, without More
// (which depends on the order: TestOneRelistMarksEachPodsLastEvent).
func drain(ch <-chan PodLifecycleEvent) []PodLifecycleEvent {
	out := []PodLifecycleEvent{}
	for len(ch) > 0 {
		e := <-ch
		e.More = false
		out = append(out, e)
	}
	sortEvents(out)
	return out
}

func sortEvents(es []PodLifecycleEvent) {
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

func cid(id string) runtime.ContainerID {
	return runtime.ContainerID{Type: testRuntimeType, ID: id}
}

func ctr(id string, state runtime.ContainerState) *runtime.Container {
	return &runtime.Container{ID: cid(id), Name: id, State: state}
}

func pod(uid types.UID, containers ...*runtime.Container) *runtime.Pod {
	return &runtime.Pod{ID: uid, Name: "pod-" + string(uid), Namespace: "ns", Containers: containers}
}

func sandboxPod(uid types.UID, sandboxes ...*runtime.Container) *runtime.Pod {
	return &runtime.Pod{ID: uid, Name: "pod-" + string(uid), Namespace: "ns", Sandboxes: sandboxes}
}

func ev(uid types.UID, t PodLifecycleEventType, id string) PodLifecycleEvent {
	return PodLifecycleEvent{ID: uid, Type: t, ContainerID: cid(id).String()}
}

// events returns es sorted, as drain returns them.
func events(es ...PodLifecycleEvent) []PodLifecycleEvent {
	out := append([]PodLifecycleEvent{}, es...)
	sortEvents(out)
	return out
}

const (
	cRunning = runtime.ContainerStateRunning
	cExited  = runtime.ContainerStateExited
	cCreated = runtime.ContainerStateCreated
	cUnknown = runtime.ContainerStateUnknown
)
