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
}
