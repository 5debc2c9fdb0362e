package podworkers

import (
	"context"
	"errors"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// Errors of the package. Callers branch with errors.Is.
var (
	// ErrInvalidConfig is wrapped by New when the Config is unusable.
	ErrInvalidConfig = errors.New("podworkers: invalid config")
	// ErrInvalidUpdate is wrapped by UpdatePod when the update names no pod,
	// or asks anything but a kill of an orphaned runtime pod.
	ErrInvalidUpdate = errors.New("podworkers: invalid update")
	// ErrTransient is for a PodSyncer to wrap when a sync failed for a reason
	// that should clear soon (the network plugin or the runtime not ready
	// yet): the pod is retried after Config.TransientBackOff instead of the
	// longer Config.BackOff.
	ErrTransient = errors.New("podworkers: transient sync error")
	// ErrSyncerPanic is wrapped into the error of a sync whose PodSyncer
	// panicked; the panic is recovered and handled like any sync error.
	ErrSyncerPanic = errors.New("podworkers: pod syncer panicked")
)

// UpdateType says why a pod is synced, as the kubelet's SyncPodType.
type UpdateType int

const (
	// SyncPodSync is a periodic or event-driven resync.
	SyncPodSync UpdateType = iota
	// SyncPodUpdate: the pod's config changed.
	SyncPodUpdate
	// SyncPodCreate: the pod was seen for the first time.
	SyncPodCreate
	// SyncPodKill: the pod must stop (eviction, removal, an orphan).
	SyncPodKill
)

// String returns the update type in lower case ("sync", "kill", ...), for logs.
func (t UpdateType) String() string {
	switch t {
	case SyncPodSync:
		return "sync"
	case SyncPodUpdate:
		return "update"
	case SyncPodCreate:
		return "create"
	case SyncPodKill:
		return "kill"
	}
	return "UpdateType(" + strconv.Itoa(int(t)) + ")"
}

// State is where a pod is in the one-way lifecycle of its worker.
type State int

const (
	// StateSyncing: the pod is expected to be set up and running.
	StateSyncing State = iota
	// StateTerminating: no new container may start; running ones are being
	// stopped.
	StateTerminating
	// StateTerminated: no container runs; cleanup may still be under way.
	StateTerminated
)

// String returns the state in lower case ("syncing", ...), for logs.
func (s State) String() string {
	switch s {
	case StateSyncing:
		return "syncing"
	case StateTerminating:
		return "terminating"
	case StateTerminated:
		return "terminated"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// KillPodOptions go with a SyncPodKill update.
type KillPodOptions struct {
	// CompletedCh, if set, is closed once the pod's containers are known
	// stopped (SyncTerminatingPod succeeded), or at once if the pod is
	// already terminated or never started. It is never closed twice.
	CompletedCh chan<- struct{}
	// Evict marks a kill by the node itself: ShouldPodContentBeRemoved then
	// reports true even before the pod is deleted.
	Evict bool
	// PodStatusFunc, if set, adjusts the status reported for the pod (for
	// example phase Failed with reason Evicted); the latest kill's function
	// is handed to SyncTerminatingPod.
	PodStatusFunc func(*v1.PodStatus)
	// GracePeriodSecondsOverride shortens the grace period; it is ignored
	// when it would lengthen it.
	GracePeriodSecondsOverride *int64
}

// UpdatePodOptions is one update handed to UpdatePod.
type UpdatePodOptions struct {
	// UpdateType is why the pod is synced.
	UpdateType UpdateType
	// Pod is the pod to sync. Required unless RunningPod is set.
	Pod *v1.Pod
	// MirrorPod is the apiserver's mirror of a static Pod. If nil, the last
	// one given is kept.
	MirrorPod *v1.Pod
	// RunningPod is a pod found on the runtime that no source knows (an
	// orphan). It is only accepted with SyncPodKill and without Pod; when Pod
	// is set it is ignored.
	RunningPod *runtime.Pod
	// KillPodOptions go with a SyncPodKill, or any update of a terminating
	// pod; on a pod that is not terminating they are dropped (their
	// CompletedCh closed).
	KillPodOptions *KillPodOptions
	// StartTime is when the caller received the update; with metrics,
	// kubelet_pod_worker_duration_seconds measures from it to the end of
	// the sync that realized it. Zero: from when UpdatePod was called.
	StartTime time.Time
}

// PodSyncer does the work of the pod workers. A pod is synced with SyncPod
// until it reaches a terminal phase (SyncPod returns true) or is asked to
// stop; then SyncTerminatingPod runs until it succeeds; then SyncTerminatedPod
// runs until it succeeds, after which the pod is finished on the node. An
// orphaned runtime pod gets only SyncTerminatingRuntimePod.
//
// The methods are called for many pods at once (never twice at once for the
// same pod) and must be safe for that. Each should return soon after ctx
// ends, with ctx's error: ctx is cancelled when the pod must stop, when a
// shorter grace period arrives, and when the workers shut down. A panic is
// recovered and treated as an error wrapping ErrSyncerPanic. Wrap
// ErrTransient for a quick retry.
//
// What a PodSyncer must do that the signatures do not say (the agent's
// default syncer does all of it):
//   - Set the pod's API status in every SyncPod, before touching the
//     runtime: the status manager, not the workers, is where it is kept.
//   - Return an error wrapping ErrTransient from SyncPod when the only
//     failures are back-offs (runtime.ErrCrashLoopBackOff,
//     runtime.ErrImagePullBackOff): otherwise the pod waits the long
//     BackOff and restarts lose the kubelet's rhythm.
//   - In SyncTerminatingPod, build the runtime.Pod for KillPod with the
//     pod's UID, name and namespace from pod: a status from the cache
//     (podStatus.RunningPod) may lack the name, and a runtime that looks
//     containers up by name then kills nothing.
//   - After the kill, ask the runtime again (GetPodStatus, not podStatus,
//     which is older than the kill) and return an error while any
//     container still runs: a nil return lets the pod be forgotten and its
//     UID reused.
//   - Return the terminal flag from SyncPod only when the pod's phase is
//     Succeeded or Failed; a pod that merely has no running container yet
//     is not terminal.
type PodSyncer interface {
	// SyncPod brings pod towards its spec using podStatus, the runtime's
	// status observed after the previous sync ended. It returns true once the
	// pod has reached a terminal phase (all containers done, not restarted).
	SyncPod(ctx context.Context, updateType UpdateType, pod, mirrorPod *v1.Pod, podStatus *runtime.PodStatus) (isTerminal bool, err error)
	// SyncTerminatingPod stops pod's containers within gracePeriod seconds
	// (never nil, never below 1) and records the final status, passed
	// through podStatusFn if that is not nil. It must not return nil unless
	// every container is stopped.
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus, gracePeriod *int64, podStatusFn func(*v1.PodStatus)) error
	// SyncTerminatingRuntimePod stops an orphaned runtime pod. It must not
	// return nil unless every container is stopped.
	SyncTerminatingRuntimePod(ctx context.Context, runningPod *runtime.Pod) error
	// SyncTerminatedPod releases what the stopped pod still holds (volumes,
	// cgroups, the final status write) before the pod may be forgotten.
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus) error
}

// KnownPod is what SyncKnownPods reports of a pod it still tracks.
type KnownPod struct {
	// State is the pod's lifecycle state.
	State State
	// Orphan is true if the pod was not in the desired set.
	Orphan bool
	// HasConfig is true if the worker has a spec of the pod (not only a
	// runtime pod).
	HasConfig bool
	// Static is true if the spec came from a static source.
	Static bool
}

// ResyncQueue is where the pod workers schedule each pod's next resync (the
// writing side of Queue; the sync loop drains it as syncloop.DuePods).
type ResyncQueue interface {
	// Enqueue makes uid due after delay, replacing an earlier due time.
	Enqueue(uid types.UID, delay time.Duration)
}

// RetryAfter wraps err so that the pod's next sync is due exactly d later
// (at most Config.ResyncInterval, as the kubelet caps it), without jitter,
// rather than after Config.BackOff or TransientBackOff; an update or a PLEG
// event still syncs it at once. A syncer that knows when what it waits for
// ends says so (the agent: when a container's crash-loop back-off ends), so
// the pod is neither synced for nothing meanwhile nor late. The kubelet
// waits the same, from its BackoffError, plus jitter. errors.Is and As see
// through it to err. A negative d is 0.
func RetryAfter(err error, d time.Duration) error {
	return &retryAfterError{err: err, after: max(0, d)}
}

// RetryDelay returns the d that RetryAfter wrapped into err (anywhere in
// its chain), and false if err has none.
func RetryDelay(err error) (time.Duration, bool) {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.after, true
	}
	return 0, false
}

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }
