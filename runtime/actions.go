package runtime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podutil"
)

// PodActions is the plan ComputePodActions makes for one SyncPod: what to
// kill, whether to (re)create the sandbox and which containers to start. A
// runtime carries it out in this order: KillPod (everything, then stop), or
// ContainersToKill; then CreateSandbox; then EphemeralContainersToStart,
// InitContainersToStart and ContainersToStart.
type PodActions struct {
	// KillPod: stop every container and the sandbox of the pod. With
	// CreateSandbox the pod starts afresh afterwards; without it the pod is
	// done (nothing is left to run).
	KillPod bool
	// CreateSandbox: create a new sandbox (after KillPod), with Attempt.
	CreateSandbox bool
	// SandboxID is the existing sandbox containers are started in; with
	// CreateSandbox it is the sandbox being replaced, if any.
	SandboxID string
	// Attempt numbers the sandbox to create (or the current one): 0 for the
	// first sandbox of the pod, one more for each replacement.
	Attempt uint32
	// InitContainersToStart are indexes into pod.Spec.InitContainers, in
	// spec order: the next regular init container (one at a time) and the
	// restartable init containers (sidecars) to start or restart.
	InitContainersToStart []int
	// ContainersToStart are indexes into pod.Spec.Containers.
	ContainersToStart []int
	// EphemeralContainersToStart are indexes into
	// pod.Spec.EphemeralContainers; an ephemeral container starts once and is
	// never restarted.
	EphemeralContainersToStart []int
	// ContainersToKill are running (or possibly running) containers to stop
	// before the starts, keyed by ID; nil when there are none.
	ContainersToKill map[ContainerID]ContainerToKill
}

// ContainerToKill says which container to stop and why.
type ContainerToKill struct {
	// Name of the container.
	Name string
	// Container is its spec in the pod (init, regular or ephemeral).
	Container *v1.Container
	// Reason is KillReasonSpecChanged or KillReasonUnknownState.
	Reason string
	// Message is a human-readable explanation for events and logs.
	Message string
}

// Reasons for ContainerToKill.Reason.
const (
	// KillReasonSpecChanged: the container's spec hash changed; it is
	// restarted with the new spec.
	KillReasonSpecChanged = "SpecChanged"
	// KillReasonUnknownState: the runtime cannot tell whether the container
	// runs, so it is killed before being started again.
	KillReasonUnknownState = "Unknown"
)

// ComputePodActions decides what SyncPod must do to bring the pod towards its
// spec, given the runtime's current status of it (nil means nothing exists).
// It is the runtime-neutral port of the kubelet's computePodActions with
// sidecar containers (restartable init containers) and container-level
// restart policies and rules. It does not decide back-off: SyncPod checks the
// back-off of each container when it starts it. Liveness and startup probe
// failures are not considered (the caller kills such containers first); a
// sidecar's pending startup probe is, through ContainerStatus.StartupPending.
// In-place resize is not considered. One deliberate difference:
// when a sandbox is recreated, a container that exited and whose restart
// policy (or rule) keeps it down is not started again; the kubelet only
// spares containers that succeeded under OnFailure.
//
// It relies on the status a runtime reports:
//   - The newest sandbox first. A runtime without sandboxes reports one
//     synthetic ready sandbox per pod (with the pod's IPs, HostNetwork set as
//     the spec asks), so the pod is not recreated on every sync.
//   - ContainerStatus.Hash from HashContainer; 0 means unknown and never
//     counts as a change.
//   - ContainerStatus.SandboxID, so that containers of an earlier sandbox do
//     not count as progress of the current one; empty means "current".
//   - ContainerStatus.IsCreating for a container an asynchronous backend
//     is still creating: it is neither started again nor killed, and it
//     keeps the pod up; any other created container is one whose start
//     failed, which is started again (the kubelet's rule).
func ComputePodActions(pod *v1.Pod, status *PodStatus) PodActions {
	if status == nil {
		status = &PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	create, attempt, sandboxID := podSandboxChanged(pod, status)
	a := PodActions{KillPod: create, CreateSandbox: create, SandboxID: sandboxID, Attempt: attempt}

	if create {
		// A pod that must not restart and has already run containers is
		// done: do not bring up a sandbox just to find that out.
		if pod.Spec.RestartPolicy == v1.RestartPolicyNever && attempt != 0 && len(status.ContainerStatuses) != 0 {
			a.CreateSandbox = false
			return a
		}
		var toStart []int
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if exitedForGood(c, pod, status) {
				continue
			}
			toStart = append(toStart, i)
		}
		// Nothing to start and initialization done: the pod is finished.
		if len(toStart) == 0 && hasAnyRegularContainerCreated(pod, status) {
			a.CreateSandbox = false
			return a
		}
		// A new sandbox starts from the beginning: the first init container.
		if len(pod.Spec.InitContainers) != 0 {
			a.InitContainersToStart = []int{0}
			return a
		}
		a.ContainersToStart = toStart
		return a
	}

	// Ephemeral containers may start before initialization completes.
	for i := range pod.Spec.EphemeralContainers {
		if status.FindContainerStatusByName(pod.Spec.EphemeralContainers[i].Name) == nil {
			a.EphemeralContainersToStart = append(a.EphemeralContainersToStart, i)
		}
	}

	initialized := computeInitContainerActions(pod, status, &a)
	if a.KillPod || !initialized {
		return a
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := status.FindContainerStatusByName(c.Name)
		if cs != nil && cs.IsCreating() {
			keep++ // an asynchronous backend is still starting it
			continue
		}
		if cs == nil || cs.State != ContainerStateRunning {
			if shouldContainerBeRestarted(c, pod, status) {
				a.ContainersToStart = append(a.ContainersToStart, i)
				if cs != nil && cs.State == ContainerStateUnknown {
					// It may still run: kill it so two instances never coexist.
					a.kill(cs, c, KillReasonUnknownState,
						fmt.Sprintf("Container is in %q state, try killing it before restart", cs.State))
				}
			}
			continue
		}
		if !specChanged(c, cs) {
			keep++
			continue
		}
		// A changed spec restarts the container whatever the restart policy.
		a.ContainersToStart = append(a.ContainersToStart, i)
		a.kill(cs, c, KillReasonSpecChanged,
			fmt.Sprintf("Container %s definition changed, will be restarted", c.Name))
	}

	if keep == 0 && len(a.ContainersToStart) == 0 {
		a.KillPod = true
		// Sidecars alone must not keep a finished pod alive.
		a.InitContainersToStart = nil
	}
	return a
}

func (a *PodActions) kill(cs *ContainerStatus, c *v1.Container, reason, msg string) {
	if a.ContainersToKill == nil {
		a.ContainersToKill = make(map[ContainerID]ContainerToKill)
	}
	a.ContainersToKill[cs.ID] = ContainerToKill{Name: cs.Name, Container: c, Reason: reason, Message: msg}
}

// computeInitContainerActions adds the init container starts (and kills) to
// a and reports whether the pod is initialized: every regular init container
// succeeded and every sidecar runs. Init containers are walked from the last,
// because completed ones may have been garbage collected: the last one with a
// status tells how far initialization got.
func computeInitContainerActions(pod *v1.Pod, status *PodStatus, a *PodActions) bool {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return true
	}
	activeSandbox := activeSandboxID(status)
	// A regular container started in this sandbox means initialization
	// finished, even if init containers were garbage collected since.
	initialized := hasAnyActiveRegularContainerStarted(pod, status, activeSandbox)
	// previous: the init containers before index i have been initialized.
	previous := initialized

	for i := len(inits) - 1; i >= 0; i-- {
		c := &inits[i]
		sidecar := podutil.IsRestartableInitContainer(c)
		cs := findActiveContainerStatus(status, c.Name, activeSandbox)
		if cs == nil {
			// Gone after initialization: only a sidecar must come back.
			if previous && sidecar {
				a.InitContainersToStart = append(a.InitContainersToStart, i)
			}
			continue
		}
		if previous && !sidecar {
			continue
		}

		switch cs.State {
		case ContainerStateCreated:
			if cs.IsCreating() {
				break // an asynchronous backend is still starting it
			}
			// Creation and start are one step; stuck in created means the
			// start failed. Start it again.
			a.InitContainersToStart = append(a.InitContainersToStart, i)

		case ContainerStateRunning:
			if !sidecar {
				break // a regular init container still at work
			}
			if cs.StartupPending && !previous {
				break // what follows waits for its startup probe
			}
			if i == len(inits)-1 {
				initialized = true
			} else if !previous {
				// The sidecar is up for the first time: start the next one.
				a.InitContainersToStart = append(a.InitContainersToStart, i+1)
			}
			if specChanged(c, cs) {
				a.kill(cs, c, KillReasonSpecChanged,
					fmt.Sprintf("Init container %s definition changed", c.Name))
				a.InitContainersToStart = append(a.InitContainersToStart, i)
			}

		case ContainerStateExited:
			if sidecar {
				a.InitContainersToStart = append(a.InitContainersToStart, i)
				break
			}
			if isInitContainerFailed(cs) {
				if !shouldContainerBeRestarted(c, pod, status) {
					// A failed init container that may not restart fails the pod.
					a.KillPod = true
					a.InitContainersToStart = nil
					return false
				}
				a.InitContainersToStart = append(a.InitContainersToStart, i)
				break
			}
			if i == len(inits)-1 {
				initialized = true
			} else {
				a.InitContainersToStart = append(a.InitContainersToStart, i+1)
			}

		default: // unknown: it may still run, kill it before starting again
			if !sidecar {
				// No exit code to match rules against: only the policies.
				if !podutil.ContainerMayRestart(c, &pod.Spec) {
					a.KillPod = true
					a.InitContainersToStart = nil
					return false
				}
			}
			a.kill(cs, c, KillReasonUnknownState,
				fmt.Sprintf("Init container is in %q state, try killing it before restart", cs.State))
			a.InitContainersToStart = append(a.InitContainersToStart, i)
		}
		previous = true
	}

	if !previous {
		// No init container has started yet.
		a.InitContainersToStart = append(a.InitContainersToStart, 0)
	}
	// The walk went backwards; start in spec order.
	s := a.InitContainersToStart
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	return initialized
}

// podSandboxChanged reports whether the pod needs a new sandbox, the attempt
// number of the sandbox to use and the ID of the current one.
func podSandboxChanged(pod *v1.Pod, status *PodStatus) (bool, uint32, string) {
	if len(status.SandboxStatuses) == 0 {
		return true, 0, ""
	}
	ready := 0
	for _, s := range status.SandboxStatuses {
		if s.State == SandboxStateReady {
			ready++
		}
	}
	newest := status.SandboxStatuses[0]
	switch {
	case ready > 1:
		// More than one ready sandbox: reconcile by starting afresh.
		return true, newest.Attempt + 1, newest.ID
	case newest.State != SandboxStateReady:
		return true, newest.Attempt + 1, newest.ID
	case newest.HostNetwork != pod.Spec.HostNetwork:
		// The network namespace cannot change in place.
		return true, newest.Attempt + 1, ""
	case !pod.Spec.HostNetwork && len(newest.IPs) == 0:
		return true, newest.Attempt + 1, newest.ID
	}
	return false, newest.Attempt, newest.ID
}

// activeSandboxID is the ID of the newest sandbox if it is ready, else "".
func activeSandboxID(status *PodStatus) string {
	if s := status.ReadySandbox(); s != nil {
		return s.ID
	}
	return ""
}

// isActive reports whether cs belongs to the active sandbox; see
// ContainerStatus.SandboxID.
func isActive(cs *ContainerStatus, activeSandbox string) bool {
	return cs.SandboxID == "" || activeSandbox == "" || cs.SandboxID == activeSandbox
}

func findActiveContainerStatus(status *PodStatus, name, activeSandbox string) *ContainerStatus {
	for _, cs := range status.ContainerStatuses {
		if cs.Name == name && isActive(cs, activeSandbox) {
			return cs
		}
	}
	return nil
}

func hasAnyActiveRegularContainerStarted(pod *v1.Pod, status *PodStatus, activeSandbox string) bool {
	for _, cs := range status.ContainerStatuses {
		if !isActive(cs, activeSandbox) {
			continue
		}
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == cs.Name {
				return true
			}
		}
	}
	return false
}

// hasAnyRegularContainerCreated reports whether any regular container was
// ever created, which means initialization completed once.
func hasAnyRegularContainerCreated(pod *v1.Pod, status *PodStatus) bool {
	for i := range pod.Spec.Containers {
		cs := status.FindContainerStatusByName(pod.Spec.Containers[i].Name)
		if cs == nil {
			continue
		}
		switch cs.State {
		case ContainerStateCreated, ContainerStateRunning, ContainerStateExited:
			return true
		}
	}
	return false
}

func specChanged(c *v1.Container, cs *ContainerStatus) bool {
	return cs.Hash != 0 && cs.Hash != HashContainer(c)
}

// isInitContainerFailed: exited non-zero, OOM-killed, or in unknown state.
func isInitContainerFailed(cs *ContainerStatus) bool {
	return cs.Reason == "OOMKilled" ||
		(cs.State == ContainerStateExited && cs.ExitCode != 0) ||
		cs.State == ContainerStateUnknown
}

// exitedForGood reports whether the container's newest instance exited and
// its restart policy keeps it down, so a new sandbox does not start it again.
func exitedForGood(c *v1.Container, pod *v1.Pod, status *PodStatus) bool {
	cs := status.FindContainerStatusByName(c.Name)
	return cs != nil && cs.State == ContainerStateExited && !podutil.ContainerShouldRestart(c, &pod.Spec, int32(cs.ExitCode))
}

// shouldContainerBeRestarted decides for a container that is not running.
func shouldContainerBeRestarted(c *v1.Container, pod *v1.Pod, status *PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false // a pod being deleted starts nothing
	}
	cs := status.FindContainerStatusByName(c.Name)
	switch {
	case cs == nil:
		return true // never started (or garbage collected)
	case cs.State == ContainerStateRunning:
		return false
	case cs.State == ContainerStateUnknown || cs.State == ContainerStateCreated:
		return true
	}
	return podutil.ContainerShouldRestart(c, &pod.Spec, int32(cs.ExitCode))
}
