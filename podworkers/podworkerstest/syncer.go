package podworkerstest

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/runtime"
)

// Method names a PodSyncer method.
type Method string

// The PodSyncer methods, as recorded in Call.Method.
const (
	SyncPod                   Method = "SyncPod"
	SyncTerminatingPod        Method = "SyncTerminatingPod"
	SyncTerminatingRuntimePod Method = "SyncTerminatingRuntimePod"
	SyncTerminatedPod         Method = "SyncTerminatedPod"
)

// Call is one recorded call of a Syncer.
type Call struct {
	Method Method
	UID    types.UID
	// Name is the pod's (or the runtime pod's) name.
	Name string
	// UpdateType is set for SyncPod.
	UpdateType podworkers.UpdateType
	// MirrorPod is set for SyncPod.
	MirrorPod *v1.Pod
	// GracePeriod is the value passed to SyncTerminatingPod, 0 otherwise.
	GracePeriod int64
	// HasStatusFn is true if SyncTerminatingPod got a status function.
	HasStatusFn bool
	// RunningPod is set for SyncTerminatingRuntimePod.
	RunningPod *runtime.Pod
	// Status is the runtime status the call got.
	Status *runtime.PodStatus
}

// Syncer is a thread-safe podworkers.PodSyncer that records its calls. By
// default every call succeeds and SyncPod reports the pod not terminal.
// SetTerminal and SetError change that per pod; the Fn fields, set before
// the workers run, replace a method's result entirely.
type Syncer struct {
	SyncPodFn                   func(ctx context.Context, updateType podworkers.UpdateType, pod, mirrorPod *v1.Pod, status *runtime.PodStatus) (bool, error)
	SyncTerminatingPodFn        func(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus, gracePeriod *int64, podStatusFn func(*v1.PodStatus)) error
	SyncTerminatingRuntimePodFn func(ctx context.Context, runningPod *runtime.Pod) error
	SyncTerminatedPodFn         func(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus) error

	mu       sync.Mutex
	calls    []Call
	terminal map[types.UID]bool
	errs     map[errKey]error
	waiters  []waiter
}

type errKey struct {
	m   Method
	uid types.UID
}

type waiter struct {
	n  int
	ch chan struct{}
}

var _ podworkers.PodSyncer = (*Syncer)(nil)

// SetTerminal makes SyncPod of uid report the pod terminal from now on.
func (s *Syncer) SetTerminal(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.terminal == nil {
		s.terminal = make(map[types.UID]bool)
	}
	s.terminal[uid] = true
}

// SetError makes method m fail with err for uid from now on; nil clears it.
func (s *Syncer) SetError(m Method, uid types.UID, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errs == nil {
		s.errs = make(map[errKey]error)
	}
	if err == nil {
		delete(s.errs, errKey{m, uid})
		return
	}
	s.errs[errKey{m, uid}] = err
}

// Calls returns a copy of every call so far, in order.
func (s *Syncer) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsFor returns the calls for one pod UID, in order.
func (s *Syncer) CallsFor(uid types.UID) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if c.UID == uid {
			out = append(out, c)
		}
	}
	return out
}

// Methods returns the method of each call for uid, in order: a compact
// history to compare in tests.
func (s *Syncer) Methods(uid types.UID) []Method {
	var out []Method
	for _, c := range s.CallsFor(uid) {
		out = append(out, c.Method)
	}
	return out
}

// WaitCalls returns a channel closed once at least n calls were recorded.
func (s *Syncer) WaitCalls(n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	if len(s.calls) >= n {
		close(ch)
		return ch
	}
	s.waiters = append(s.waiters, waiter{n: n, ch: ch})
	return ch
}

// record appends c and returns the error set for it; it also wakes waiters.
func (s *Syncer) record(c Call) (terminal bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
	kept := s.waiters[:0]
	for _, w := range s.waiters {
		if len(s.calls) >= w.n {
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	s.waiters = kept
	return s.terminal[c.UID], s.errs[errKey{c.Method, c.UID}]
}

// SyncPod implements podworkers.PodSyncer.
func (s *Syncer) SyncPod(ctx context.Context, updateType podworkers.UpdateType, pod, mirrorPod *v1.Pod, status *runtime.PodStatus) (bool, error) {
	terminal, err := s.record(Call{Method: SyncPod, UID: pod.UID, Name: pod.Name, UpdateType: updateType, MirrorPod: mirrorPod, Status: status})
	if s.SyncPodFn != nil {
		return s.SyncPodFn(ctx, updateType, pod, mirrorPod, status)
	}
	if err != nil {
		return false, err
	}
	return terminal, nil
}

// SyncTerminatingPod implements podworkers.PodSyncer.
func (s *Syncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus, gracePeriod *int64, podStatusFn func(*v1.PodStatus)) error {
	c := Call{Method: SyncTerminatingPod, UID: pod.UID, Name: pod.Name, HasStatusFn: podStatusFn != nil, Status: status}
	if gracePeriod != nil {
		c.GracePeriod = *gracePeriod
	}
	_, err := s.record(c)
	if s.SyncTerminatingPodFn != nil {
		return s.SyncTerminatingPodFn(ctx, pod, status, gracePeriod, podStatusFn)
	}
	return err
}

// SyncTerminatingRuntimePod implements podworkers.PodSyncer.
func (s *Syncer) SyncTerminatingRuntimePod(ctx context.Context, runningPod *runtime.Pod) error {
	_, err := s.record(Call{Method: SyncTerminatingRuntimePod, UID: runningPod.ID, Name: runningPod.Name, RunningPod: runningPod})
	if s.SyncTerminatingRuntimePodFn != nil {
		return s.SyncTerminatingRuntimePodFn(ctx, runningPod)
	}
	return err
}

// SyncTerminatedPod implements podworkers.PodSyncer.
func (s *Syncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus) error {
	_, err := s.record(Call{Method: SyncTerminatedPod, UID: pod.UID, Name: pod.Name, Status: status})
	if s.SyncTerminatedPodFn != nil {
		return s.SyncTerminatedPodFn(ctx, pod, status)
	}
	return err
}

// Cache is a runtime.Cache whose GetNewerThan answers at once with what Get
// would; see the package doc.
type Cache struct {
	runtime.Cache
}

// NewCache returns an empty Cache.
func NewCache() *Cache { return &Cache{Cache: runtime.NewCache()} }

// GetNewerThan returns the cached status without waiting, unless ctx ended.
func (c *Cache) GetNewerThan(ctx context.Context, uid types.UID, _ time.Time) (*runtime.PodStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.Get(uid)
}
