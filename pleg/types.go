package pleg

import (
	"k8s.io/apimachinery/pkg/types"
)

// PodLifeCycleEventType says what changed in a pod.
type PodLifeCycleEventType string

const (
	// ContainerStarted: a container is now running.
	ContainerStarted PodLifeCycleEventType = "ContainerStarted"
	// ContainerDied: a container exited.
	ContainerDied PodLifeCycleEventType = "ContainerDied"
	// ContainerRemoved: a container is gone from the runtime.
	ContainerRemoved PodLifeCycleEventType = "ContainerRemoved"
	// PodSync: the pod needs a sync for a reason not tied to one container.
	PodSync PodLifeCycleEventType = "PodSync"
	// ContainerChanged: a container moved to created or unknown; never sent
	// to the sync loop.
	ContainerChanged PodLifeCycleEventType = "ContainerChanged"
	// ConditionMet: a condition a pod worker waits on was met.
	ConditionMet PodLifeCycleEventType = "ConditionMet"
)

// PodLifecycleEvent is one change of one pod.
type PodLifecycleEvent struct {
	// ID is the pod's UID.
	ID types.UID
	// Type is what happened.
	Type PodLifeCycleEventType
	// ContainerID is the container concerned ("type://id"), empty for PodSync.
	ContainerID string
}
