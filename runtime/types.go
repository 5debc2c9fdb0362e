package runtime

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ContainerState is the state of a container as the runtime reports it.
type ContainerState string

const (
	// ContainerStateCreated: created but never started.
	ContainerStateCreated ContainerState = "created"
	// ContainerStateRunning: started and not yet exited.
	ContainerStateRunning ContainerState = "running"
	// ContainerStateExited: started (or failed to start) and finished.
	ContainerStateExited ContainerState = "exited"
	// ContainerStateUnknown: the runtime cannot tell; callers treat such a
	// container as possibly running and kill it before starting it again.
	ContainerStateUnknown ContainerState = "unknown"
)

// SandboxState is the state of a pod sandbox.
type SandboxState string

const (
	// SandboxStateReady: the sandbox and its network are up.
	SandboxStateReady SandboxState = "ready"
	// SandboxStateNotReady: stopped, or never fully created.
	SandboxStateNotReady SandboxState = "notready"
)

// Pod is a pod as it runs on the runtime: the containers and sandboxes that
// belong to one pod UID. It carries no spec; see PodStatus for details.
type Pod struct {
	ID        types.UID
	Name      string
	Namespace string
	// CreatedAt is the creation time of the newest sandbox, in Unix nanoseconds.
	CreatedAt uint64
	// Containers are the pod's application containers (init, regular and
	// ephemeral), in any state when listed with GetPods(all=true).
	Containers []*Container
	// Sandboxes are the pod's sandboxes, presented as containers so that
	// relisting can diff both with one mechanism. A runtime without sandboxes
	// leaves this empty.
	Sandboxes []*Container
}

// Container is one container or sandbox of a running Pod.
type Container struct {
	ID      ContainerID
	Name    string
	Image   string
	ImageID string
	// Hash is HashContainer of the spec the container was created from.
	Hash  uint64
	State ContainerState
	// SandboxID is, for a container, the ID of the sandbox it runs in;
	// Attempt and CreatedAt (Unix nanoseconds) are the creation attempt (a
	// container's restart count) and time. Runtimes that list them let an
	// inspection start from the listing (see ListedPodInspector).
	SandboxID string
	Attempt   uint32
	CreatedAt int64
}

// ListedPodInspector is a Runtime that can inspect a pod from a listing of
// it (one of GetPods(ctx, true)), without listing it again: the PLEG's
// relist inspects the pods it just listed. The status is as GetPodStatus's,
// with the listed sandboxes and containers. It is optional: the PLEG looks
// for it on its Runtime and falls back to GetPodStatus. It is exported for
// the authors of a Runtime (runtime/cri implements it), whose PLEG relists
// would otherwise list every changed pod twice.
type ListedPodInspector interface {
	GetPodStatusListed(ctx context.Context, pod *Pod) (*PodStatus, error)
}

// FindContainerByName returns the pod's container with the given name, or nil.
func (p *Pod) FindContainerByName(name string) *Container {
	for _, c := range p.Containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// FindContainerByID returns the pod's container (not sandbox) with the given
// ID, or nil.
func (p *Pod) FindContainerByID(id ContainerID) *Container {
	for _, c := range p.Containers {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// IsEmpty reports whether the pod has neither containers nor sandboxes.
func (p *Pod) IsEmpty() bool { return len(p.Containers) == 0 && len(p.Sandboxes) == 0 }

// PodStatus is the runtime's detailed view of one pod, as GetPodStatus
// returns it. A pod that does not exist has a PodStatus with only ID, Name and
// Namespace set.
type PodStatus struct {
	ID        types.UID
	Name      string
	Namespace string
	// IPs of the pod, the primary first. Empty for host-network pods unless
	// the runtime reports the host's.
	IPs []string
	// ContainerStatuses holds every known instance of every container, newest
	// first for each name (restarts leave the exited instances behind until
	// garbage collection).
	ContainerStatuses []*ContainerStatus
	// SandboxStatuses holds the pod's sandboxes, newest first.
	SandboxStatuses []*SandboxStatus
	// TimeStamp is when the runtime produced this status; zero if unknown.
	TimeStamp time.Time
	// APIStatus is the pod's API status as a runtime that owns it (a
	// StatusOwner, such as package provider's) reports it; nil from every
	// other runtime, whose API status the agent generates from the above.
	// Read only.
	APIStatus *v1.PodStatus
}

// ContainerStatus is the status of one container instance.
type ContainerStatus struct {
	ID         ContainerID
	Name       string
	State      ContainerState
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   int
	// Reason and Message explain the state, for example "Error" or
	// "OOMKilled" for an exited container.
	Reason  string
	Message string
	Image   string
	ImageID string
	// Hash is HashContainer of the spec the container was created from.
	Hash uint64
	// RestartCount is how often a container of this name was restarted in
	// this pod before this instance was created.
	RestartCount int
	// SandboxID is the sandbox the container was created in. Empty when the
	// runtime has no sandboxes or cannot tell; ComputePodActions then takes
	// the container to belong to the current sandbox.
	SandboxID string
	// StartupPending is not the runtime's: the caller of SyncPod sets it on
	// a running sidecar (restartable init container) whose startup probe
	// has not passed yet, and ComputePodActions then waits for it before
	// starting what follows, as the kubelet does.
	StartupPending bool
}

// SandboxStatus is the status of one pod sandbox.
type SandboxStatus struct {
	ID    string
	State SandboxState
	// Attempt counts sandbox creations for this pod, starting at 0.
	Attempt   uint32
	CreatedAt time.Time
	// IPs of the sandbox, the primary first.
	IPs []string
	// HostNetwork is true when the sandbox shares the node's network
	// namespace.
	HostNetwork bool
}

// FindContainerStatusByName returns the newest status of the named container,
// or nil if there is none.
func (s *PodStatus) FindContainerStatusByName(name string) *ContainerStatus {
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// RunningContainerStatuses returns the statuses of the containers that are
// running.
func (s *PodStatus) RunningContainerStatuses() []*ContainerStatus {
	var out []*ContainerStatus
	for _, c := range s.ContainerStatuses {
		if c.State == ContainerStateRunning {
			out = append(out, c)
		}
	}
	return out
}

// RunningPod turns the status into the Pod that KillPod stops, as the
// kubelet's ConvertPodStatusToRunningPod does: the containers that run or may
// run (running, created or unknown) and every sandbox, presented as a
// container that is running while the sandbox is ready. runtimeType is the
// sandboxes' ContainerID type, the runtime's Type().
func (s *PodStatus) RunningPod(runtimeType string) Pod {
	p := Pod{ID: s.ID, Name: s.Name, Namespace: s.Namespace}
	for _, c := range s.ContainerStatuses {
		switch c.State {
		case ContainerStateRunning, ContainerStateCreated, ContainerStateUnknown:
			p.Containers = append(p.Containers, &Container{ID: c.ID, Name: c.Name, Image: c.Image, ImageID: c.ImageID, Hash: c.Hash, State: c.State})
		}
	}
	for _, sb := range s.SandboxStatuses {
		state := ContainerStateExited
		if sb.State == SandboxStateReady {
			state = ContainerStateRunning
		}
		p.Sandboxes = append(p.Sandboxes, &Container{ID: ContainerID{Type: runtimeType, ID: sb.ID}, State: state})
	}
	return p
}

// ReadySandbox returns the newest sandbox if it is ready, or nil.
func (s *PodStatus) ReadySandbox() *SandboxStatus {
	if len(s.SandboxStatuses) > 0 && s.SandboxStatuses[0].State == SandboxStateReady {
		return s.SandboxStatuses[0]
	}
	return nil
}

// RuntimeConditionType names a condition of the runtime as a whole.
type RuntimeConditionType string

const (
	// RuntimeReady: the runtime can run containers.
	RuntimeReady RuntimeConditionType = "RuntimeReady"
	// NetworkReady: the runtime's pod network is set up.
	NetworkReady RuntimeConditionType = "NetworkReady"
)

// RuntimeCondition is one condition of the runtime.
type RuntimeCondition struct {
	Type    RuntimeConditionType
	Status  bool
	Reason  string
	Message string
}

// RuntimeStatus is the runtime's health as Status reports it.
type RuntimeStatus struct {
	Conditions []RuntimeCondition
}

// Condition returns the condition of the given type, or nil.
func (s *RuntimeStatus) Condition(t RuntimeConditionType) *RuntimeCondition {
	if s == nil {
		return nil
	}
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// Ready reports whether both RuntimeReady and NetworkReady are true. A
// condition the runtime does not report counts as not ready.
func (s *RuntimeStatus) Ready() bool {
	r, n := s.Condition(RuntimeReady), s.Condition(NetworkReady)
	return r != nil && r.Status && n != nil && n.Status
}
