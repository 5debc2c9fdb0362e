package runtime

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Runtime runs pods. Implementations must be safe for concurrent use: pod
// workers call SyncPod and KillPod for different pods at the same time, while
// the PLEG calls GetPods and GetPodStatus.
//
// Implementing it:
//   - GetPods lists what runs now. With all=false only pods with a running
//     container or a ready sandbox; with all=true exited containers too.
//   - GetPodStatus never fails for a pod that does not exist: it returns a
//     PodStatus with no containers. Errors mean the runtime could not answer.
//   - SyncPod brings the pod towards its spec in one step, given the status
//     the caller last saw; it is called again on the next change or resync,
//     so it starts what is due and returns. Containers in back-off are not
//     started; their step fails with ErrCrashLoopBackOff. Every step taken
//     (or refused) is recorded in the result, which is how the caller learns
//     waiting reasons such as ImagePullBackOff.
//   - KillPod stops every container and sandbox of runningPod, giving each
//     container the effective grace period (see EffectiveGracePeriod) to exit.
//     pod may be nil for an orphan that no configuration knows any more.
type Runtime interface {
	// Type names the runtime, for example "containerd"; it is the type part
	// of the ContainerIDs it hands out.
	Type() string
	// Version returns the runtime's version.
	Version(ctx context.Context) (string, error)
	// Status reports the runtime's conditions.
	Status(ctx context.Context) (*RuntimeStatus, error)
	// GetPods lists the pods on the runtime; see the type's doc for all.
	GetPods(ctx context.Context, all bool) ([]*Pod, error)
	// GetPodStatus inspects one pod.
	GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*PodStatus, error)
	// SyncPod moves the pod one step towards its spec.
	SyncPod(ctx context.Context, pod *v1.Pod, status *PodStatus, pullSecrets []v1.Secret, backoff *Backoff) PodSyncResult
	// KillPod stops the pod's containers and sandboxes.
	KillPod(ctx context.Context, pod *v1.Pod, runningPod Pod, gracePeriodOverride *int64) error
}

// ContainerKiller is implemented by runtimes that can stop one container of
// a pod and leave the rest of it (its sandbox, its other containers, its
// cgroup) running, as the kubelet does with a container that failed its
// liveness or startup probe. KillPod, by contrast, ends the pod: a runtime
// may release what the pod holds once it returns. The Killing event's
// message comes from WithKillMessage, as with KillPod.
type ContainerKiller interface {
	KillContainer(ctx context.Context, pod *v1.Pod, c Container, gracePeriodOverride *int64) error
}

// GCPolicy bounds how many dead containers garbage collection keeps.
type GCPolicy struct {
	// MinAge is how long a dead container is kept at least.
	MinAge time.Duration
	// MaxPerPodContainer is how many dead instances of one container are
	// kept; negative means no limit.
	MaxPerPodContainer int
	// MaxContainers is how many dead containers are kept in all; negative
	// means no limit.
	MaxContainers int
	// PodState, if set, says which stopped pods go whole (containers,
	// sandboxes, logs, data on disk) when all sources are ready, as the
	// kubelet's container GC asks its podStateProvider: an evicted pod, a
	// deleted one whose containers stopped, one no source knows. A pod that
	// only finished (Succeeded or Failed, still in the apiserver) keeps its
	// newest dead containers and their logs. nil: the pods KillPod stopped
	// (and no SyncPod restarted), for callers without pod workers.
	PodState PodStateProvider
}

// PodStateProvider tells garbage collection which pods' content may go;
// podworkers.PodWorkers is one.
type PodStateProvider interface {
	// ShouldPodContentBeRemoved reports whether everything of the pod with
	// uid may be removed once nothing of it runs.
	ShouldPodContentBeRemoved(uid types.UID) bool
}

// GarbageCollector is implemented by runtimes that keep dead containers and
// sandboxes around and can remove them.
type GarbageCollector interface {
	// GarbageCollect removes dead containers and sandboxes beyond policy.
	// When allSourcesReady, stopped pods policy.PodState lets go are
	// removed whole.
	GarbageCollect(ctx context.Context, policy GCPolicy, allSourcesReady bool) error
}

// Image is an image present on the node.
type Image struct {
	ID       string
	RepoTags []string
	Size     uint64
	// Pinned images (the sandbox image, for one) are never garbage
	// collected.
	Pinned bool
}

// ImageFsStats is the usage of the filesystem that holds images.
type ImageFsStats struct {
	// UsedBytes is what the images take; CapacityBytes the filesystem's
	// size (0: unknown).
	UsedBytes, CapacityBytes uint64
	// AvailableBytes is the filesystem's free space for unprivileged
	// users, meaningful when CapacityBytes is not 0.
	AvailableBytes uint64
	// InodesUsed is what the images take (0: unknown); Inodes and
	// InodesFree are the filesystem's (Inodes 0: unknown).
	InodesUsed, Inodes, InodesFree uint64
}

// ImageFsInfoer is implemented by runtimes that report their image
// filesystem's usage (the CRI's ImageFsInfo); image garbage collection
// needs it.
type ImageFsInfoer interface {
	ImageFsInfo(ctx context.Context) (ImageFsStats, error)
}

// ImageService is implemented by runtimes that manage images.
type ImageService interface {
	// PullImage pulls image and returns its ID.
	PullImage(ctx context.Context, image string, pullSecrets []v1.Secret) (string, error)
	// ListImages lists the images on the node.
	ListImages(ctx context.Context) ([]Image, error)
	// RemoveImage removes an image by ID or reference.
	RemoveImage(ctx context.Context, image string) error
}

// ContainerEventType says what happened to a container.
type ContainerEventType string

// The container events a ContainerEventer reports.
const (
	ContainerCreatedEvent ContainerEventType = "created"
	ContainerStartedEvent ContainerEventType = "started"
	ContainerStoppedEvent ContainerEventType = "stopped"
	ContainerDeletedEvent ContainerEventType = "deleted"
)

// ContainerEvent is one change reported by a ContainerEventer.
type ContainerEvent struct {
	ContainerID ContainerID
	Type        ContainerEventType
	// PodUID is the pod the container belongs to.
	PodUID types.UID
	// CreatedAt is when the runtime saw the change.
	CreatedAt time.Time
	// PodStatus, when not nil, is the pod's status right after the change,
	// so a consumer need not call GetPodStatus.
	PodStatus *PodStatus
}

// ContainerEventer is implemented by runtimes that stream container events
// (the CRI's GetContainerEvents). An evented PLEG uses it and falls back to
// relisting when the stream fails.
type ContainerEventer interface {
	// WatchContainerEvents streams events until ctx ends or the stream
	// breaks; the channel is closed then. A runtime that cannot stream
	// returns an error wrapping ErrNotSupported.
	WatchContainerEvents(ctx context.Context) (<-chan ContainerEvent, error)
}

// StatusOwner is implemented by runtimes that own their pods' API status,
// as a virtual-kubelet provider does (package provider): the status they
// put in PodStatus.APIStatus is the one the agent reports, apart from what
// the kubelet always sets (start time, QoS class, host IPs if missing,
// condition transition times, observed generation), and they report every
// change of it as a ContainerEvent carrying the new PodStatus, which the
// agent streams (evented PLEG) rather than waiting for a relist. The agent
// runs no probes for their pods: readiness is theirs too.
type StatusOwner interface {
	ContainerEventer
	// OwnsPodStatus reports whether the runtime owns its pods' API status.
	OwnsPodStatus() bool
}

// EffectiveGracePeriod returns the grace period to stop pod's containers
// with: the override if set, else the deletion's if the pod is being deleted,
// else the spec's, else 30 s; never below 1 second, as with the kubelet, so a
// container always gets its TERM before KILL. pod may be nil.
func EffectiveGracePeriod(pod *v1.Pod, override *int64) int64 {
	g := int64(v1.DefaultTerminationGracePeriodSeconds)
	switch {
	case override != nil:
		g = *override
	case pod != nil && pod.DeletionGracePeriodSeconds != nil:
		g = *pod.DeletionGracePeriodSeconds
	case pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if g < 1 {
		g = 1
	}
	return g
}
