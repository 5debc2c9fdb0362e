package pleg

import (
	"k8s.io/apimachinery/pkg/types"
)

// PodLifecycleEventType says what changed in a pod.
type PodLifecycleEventType string

const (
	// ContainerStarted: a container is now running.
	ContainerStarted PodLifecycleEventType = "ContainerStarted"
	// ContainerDied: a container exited.
	ContainerDied PodLifecycleEventType = "ContainerDied"
	// ContainerRemoved: a container is gone from the runtime.
	ContainerRemoved PodLifecycleEventType = "ContainerRemoved"
	// PodSync: the pod needs a sync for a reason not tied to one container.
	PodSync PodLifecycleEventType = "PodSync"
	// containerChanged: a container moved to created or unknown. The
	// kubelet computes it and drops it before the sync loop; so do the
	// PLEGs here, which is why it is not exported. (The kubelet's
	// ConditionMet, for its pod-condition waiters, has no use here: nodekit
	// has no such waiters.)
	containerChanged PodLifecycleEventType = "ContainerChanged"
)

// PodLifecycleEvent is one change of one pod.
type PodLifecycleEvent struct {
	// ID is the pod's UID.
	ID types.UID
	// Type is what happened.
	Type PodLifecycleEventType
	// ContainerID is the container concerned ("type://id"), empty for PodSync.
	ContainerID string
	// More: the same relist has more events of this pod right behind this
	// one (GenericPLEG; the evented PLEG's events come one at a time). A
	// consumer that syncs the pod on each event can sync once, at the
	// last: a second request would find the pod's worker synced or not
	// yet started as goroutines happen to run, and a sync of its own
	// waits for the next relist (runtime.Cache.GetNewerThan), which moves
	// the pod's resyncs. An event dropped on a full channel may be that
	// last.
	More bool
}
