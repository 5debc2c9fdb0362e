package podworkers

import (
	"context"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// WaitIdle blocks until no pod but those in except is being worked on.
func (p *PodWorkers) WaitIdle(except ...types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.busy(except) {
		p.idle.Wait()
	}
}

func (p *PodWorkers) busy(except []types.UID) bool {
outer:
	for uid, s := range p.statuses {
		for _, e := range except {
			if e == uid {
				continue outer
			}
		}
		if s.working {
			return true
		}
	}
	return false
}

// Holds lets a test stop chosen workers before they take their next update.
type Holds struct {
	mu    sync.Mutex
	holds map[types.UID]chan struct{}
	// first holds the first worker of a UID only; arrived is closed when
	// it arrives.
	first   map[types.UID]chan struct{}
	arrived map[types.UID]chan struct{}
}

// HoldFirst makes the next worker of uid to arrive wait until Release;
// workers of uid arriving after it go on. The channel is closed when it
// arrives.
func (h *Holds) HoldFirst(uid types.UID) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.first == nil {
		h.first, h.arrived = map[types.UID]chan struct{}{}, map[types.UID]chan struct{}{}
	}
	h.first[uid], h.arrived[uid] = make(chan struct{}), make(chan struct{})
	return h.arrived[uid]
}

// Hold makes the worker of uid wait before taking its next update.
func (h *Holds) Hold(uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holds == nil {
		h.holds = make(map[types.UID]chan struct{})
	}
	if _, ok := h.holds[uid]; !ok {
		h.holds[uid] = make(chan struct{})
	}
}

// Release lets the worker of uid go on.
func (h *Holds) Release(uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok := h.holds[uid]; ok {
		close(ch)
		delete(h.holds, uid)
	}
	if ch, ok := h.first[uid]; ok {
		close(ch)
		delete(h.first, uid)
		delete(h.arrived, uid)
	}
}

func (h *Holds) wait(uid types.UID) {
	h.mu.Lock()
	ch, ok := h.holds[uid]
	if first, isFirst := h.first[uid]; isFirst && !ok && h.arrived[uid] != nil {
		// Held until Release, which finds it in first; later workers of
		// uid pass.
		close(h.arrived[uid])
		delete(h.arrived, uid)
		h.mu.Unlock()
		<-first
		return
	}
	h.mu.Unlock()
	if ok {
		<-ch
	}
}

// InstallHolds routes the workers' start through h; call before Run.
func (p *PodWorkers) InstallHolds(h *Holds) { p.beforeStart = h.wait }

// StatusView is a copy of a pod's podSyncStatus for tests.
type StatusView struct {
	Fullname                                         string
	Working                                          bool
	Pending, Active                                  *UpdatePodOptions
	SyncedAt, StartedAt, TerminatingAt, TerminatedAt time.Time
	GracePeriod                                      int64
	StartedTerminating, Deleted, Evicted, Finished   bool
	RestartRequested, ObservedRuntime                bool
}

// Status returns a view of uid's status, or nil if the pod is not tracked.
func (p *PodWorkers) Status(uid types.UID) *StatusView {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.statuses[uid]
	if !ok {
		return nil
	}
	return &StatusView{
		Fullname: s.fullname, Working: s.working, Pending: s.pendingUpdate, Active: s.activeUpdate,
		SyncedAt: s.syncedAt, StartedAt: s.startedAt, TerminatingAt: s.terminatingAt, TerminatedAt: s.terminatedAt,
		GracePeriod: s.gracePeriod, StartedTerminating: s.startedTerminating, Deleted: s.deleted,
		Evicted: s.evicted, Finished: s.finished, RestartRequested: s.restartRequested, ObservedRuntime: s.observedRuntime,
	}
}

// StaticPods returns copies of the started and waiting static pods.
func (p *PodWorkers) StaticPods() (map[string]types.UID, map[string][]types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	started := make(map[string]types.UID, len(p.startedStatic))
	for k, v := range p.startedStatic {
		started[k] = v
	}
	waiting := make(map[string][]types.UID, len(p.waitingStatic))
	for k, v := range p.waitingStatic {
		waiting[k] = append([]types.UID(nil), v...)
	}
	return started, waiting
}

// RunningWorkers returns how many pods have a worker goroutine.
func (p *PodWorkers) RunningWorkers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.statuses {
		if s.running {
			n++
		}
	}
	return n
}

// Tracked returns how many pods have a status.
func (p *PodWorkers) Tracked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.statuses)
}

// nopSyncer succeeds at everything; for tests of internals.
type nopSyncer struct{}

func (nopSyncer) SyncPod(context.Context, UpdateType, *v1.Pod, *v1.Pod, *runtime.PodStatus) (bool, error) {
	return false, nil
}
func (nopSyncer) SyncTerminatingPod(context.Context, *v1.Pod, *runtime.PodStatus, *int64, func(*v1.PodStatus)) error {
	return nil
}
func (nopSyncer) SyncTerminatingRuntimePod(context.Context, *runtime.Pod) error { return nil }
func (nopSyncer) SyncTerminatedPod(context.Context, *v1.Pod, *runtime.PodStatus) error {
	return nil
}

// recordingQueue records Enqueue calls; for tests of internals.
type recordingQueue struct {
	mu    sync.Mutex
	items []types.UID
}

func (q *recordingQueue) Enqueue(uid types.UID, _ time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = append(q.items, uid)
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
