package runtime

// ReasonContainerCreating is the ContainerStatus.Reason with which an
// asynchronous backend reports a container it is still creating.
//
// A CRI runtime creates and starts a container within one SyncPod, so a
// container left in ContainerStateCreated is one whose start failed, and
// ComputePodActions (like the kubelet) starts it again. A backend that
// accepts a start and finishes it later (a cloud API, a remote agent, a VM
// that boots) must say so, or the next sync starts the container a second
// time. Until the container runs (or fails), report it as
//
//	&runtime.ContainerStatus{
//		ID:     id,                            // known from the moment the backend accepted it
//		Name:   c.Name,
//		State:  runtime.ContainerStateCreated,
//		Reason: runtime.ReasonContainerCreating,
//		Hash:   runtime.HashContainer(c),
//	}
//
// ComputePodActions then neither starts nor kills it and lets it keep the pod
// up; the API status shows it waiting with reason ContainerCreating, as a
// kubelet's container does while its image is pulled. When the backend is
// done, report ContainerStateRunning (or ContainerStateExited with the exit
// code, or with reason "StartError" and no exit code if the start failed:
// the restart policy and the crash-loop back-off then apply as for any
// exit).
const ReasonContainerCreating = "ContainerCreating"

// IsCreating reports whether an asynchronous backend is still creating the
// container; see ReasonContainerCreating.
func (s *ContainerStatus) IsCreating() bool {
	return s.State == ContainerStateCreated && s.Reason == ReasonContainerCreating
}
