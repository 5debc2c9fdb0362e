package podworkers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// podSyncStatus is what the workers know of one pod UID.
type podSyncStatus struct {
	// ctx is cancelled to interrupt the sync in flight; cancel releases it.
	ctx    context.Context
	cancel context.CancelFunc

	fullname string
	// running is true while the pod has a worker goroutine; it has one
	// only while it has work (see workerLoop).
	running bool
	// working is true while an update is pending or being synced.
	working bool
	// lastSync is when the last sync ended: the next acts only on runtime
	// status newer than that.
	lastSync time.Time
	// pendingUpdate is the latest update not yet taken by the worker.
	pendingUpdate *UpdatePodOptions
	// activeUpdate accumulates what the worker acts on: the latest pod, the
	// last mirror pod, the kill options. Set once the pod started.
	activeUpdate *UpdatePodOptions

	syncedAt      time.Time // first seen
	startedAt     time.Time // allowed to start
	terminatingAt time.Time // termination requested
	terminatedAt  time.Time // containers known stopped
	// gracePeriod is the grace period in force once terminating; it only
	// shrinks.
	gracePeriod int64
	// kills holds the kill requests whose completion someone waits for or
	// whose status function applies.
	kills []KillPodOptions

	startedTerminating bool // the worker saw the termination
	deleted            bool // deleted on the apiserver or gone from config
	evicted            bool
	finished           bool // SyncTerminatedPod succeeded
	restartRequested   bool // created again with the same UID while terminating
	observedRuntime    bool // seen as a runtime pod
}

func (s *podSyncStatus) IsTerminationRequested() bool { return !s.terminatingAt.IsZero() }
func (s *podSyncStatus) IsTerminated() bool           { return !s.terminatedAt.IsZero() }
func (s *podSyncStatus) IsStarted() bool              { return !s.startedAt.IsZero() }

// WorkType is the pod's lifecycle state.
func (s *podSyncStatus) WorkType() State {
	switch {
	case s.IsTerminated():
		return StateTerminated
	case s.IsTerminationRequested():
		return StateTerminating
	}
	return StateSyncing
}

// mergeLastUpdate folds an update the worker takes into activeUpdate. A
// runtime pod never replaces a known spec; a nil mirror pod keeps the last
// one; kill options accumulate.
func (s *podSyncStatus) mergeLastUpdate(other UpdatePodOptions) {
	opts := s.activeUpdate
	if opts == nil {
		opts = &UpdatePodOptions{}
		s.activeUpdate = opts
	}
	if opts.Pod == nil || other.RunningPod == nil {
		opts.Pod = other.Pod
	}
	opts.RunningPod = other.RunningPod
	if other.MirrorPod != nil {
		opts.MirrorPod = other.MirrorPod
	}
	if other.KillPodOptions != nil {
		k := *other.KillPodOptions
		k.CompletedCh = nil
		opts.KillPodOptions = &k
	}
	// UpdateType is not kept: a replay of the last update is a plain sync.
}

// closeKills closes every completion channel waiting on the termination.
func (s *podSyncStatus) closeKills() {
	for i := range s.kills {
		if ch := s.kills[i].CompletedCh; ch != nil {
			close(ch)
			s.kills[i].CompletedCh = nil
		}
	}
}

// release ends the pod's context.
func (s *podSyncStatus) release() {
	if s.cancel != nil {
		s.cancel()
	}
}

// IsPodKnownTerminated reports whether the pod's containers are known
// stopped. An unknown pod is not.
func (p *PodWorkers) IsPodKnownTerminated(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return s.IsTerminated()
	}
	return false
}

// CouldHaveRunningContainers is true for a pod not yet terminated, and, until
// SyncKnownPods first ran, for any pod.
func (p *PodWorkers) CouldHaveRunningContainers(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return !s.IsTerminated()
	}
	return !p.podsSynced
}

// ShouldPodBeFinished is true once SyncTerminatedPod succeeded for the pod,
// and, after SyncKnownPods first ran, for a pod the workers do not know.
func (p *PodWorkers) ShouldPodBeFinished(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return s.finished
	}
	return p.podsSynced
}

// IsPodTerminationRequested is true from the moment the pod must stop until
// it is forgotten; containers may still be starting meanwhile. An unknown pod
// is not terminating (cleanup loops use ShouldPodContainersBeTerminating).
func (p *PodWorkers) IsPodTerminationRequested(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return s.IsTerminationRequested()
	}
	return false
}

// ShouldPodContainersBeTerminating is true once the worker has seen the
// termination (no container can start any more), and, after SyncKnownPods
// first ran, for a pod the workers do not know.
func (p *PodWorkers) ShouldPodContainersBeTerminating(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return s.startedTerminating
	}
	return p.podsSynced
}

// ShouldPodRuntimeBeRemoved is true once the pod's containers are stopped,
// and, after SyncKnownPods first ran, for a pod the workers do not know:
// resources the containers used (volumes, devices) can go.
func (p *PodWorkers) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return s.IsTerminated()
	}
	return p.podsSynced
}

// ShouldPodContentBeRemoved is true for an evicted pod, a deleted pod whose
// containers stopped, and, after SyncKnownPods first ran, a pod the workers
// do not know: its data on disk can go.
func (p *PodWorkers) ShouldPodContentBeRemoved(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.statuses[uid]; ok {
		return s.evicted || (s.deleted && s.IsTerminated())
	}
	return p.podsSynced
}

// IsPodForMirrorPodTerminatingByFullName is true while the started static
// pod of fullname ("name_namespace") is terminating, so its mirror pod is
// not deleted before it has stopped.
func (p *PodWorkers) IsPodForMirrorPodTerminatingByFullName(fullname string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	uid, ok := p.startedStatic[fullname]
	if !ok {
		return false
	}
	s, ok := p.statuses[uid]
	return ok && s.IsTerminationRequested() && !s.IsTerminated()
}
