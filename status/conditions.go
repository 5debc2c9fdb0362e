package status

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podutil"
)

// Reasons of the conditions the agent generates, as in the kubelet.
const (
	UnknownContainerStatuses = "UnknownContainerStatuses"
	PodCompleted             = "PodCompleted"
	PodFailed                = "PodFailed"
	ContainersNotReady       = "ContainersNotReady"
	ContainersNotInitialized = "ContainersNotInitialized"
	ReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// ownedByAgent reports whether the agent owns a pod condition type (it
// generates it and replaces whatever the apiserver has).
func ownedByAgent(t v1.PodConditionType) bool {
	switch t {
	case v1.PodScheduled, v1.PodReady, v1.PodInitialized, v1.ContainersReady,
		v1.PodReadyToStartContainers, v1.PodResizePending, v1.PodResizeInProgress:
		return true
	}
	return false
}

// sharedWithAgent reports whether the agent may set a condition type that
// others set too (it adds or replaces it, never removes it).
func sharedWithAgent(t v1.PodConditionType) bool {
	return t == v1.DisruptionTarget
}

func findCondition(conds []v1.PodCondition, t v1.PodConditionType) (int, *v1.PodCondition) {
	for i := range conds {
		if conds[i].Type == t {
			return i, &conds[i]
		}
	}
	return -1, nil
}

func findContainerStatus(statuses []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

func isTerminalPhase(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// nameList formats names as the kubelet's messages do ("[a b]").
func nameList(names []string) string {
	return "[" + strings.Join(names, " ") + "]"
}

func terminalContainersReady(phase v1.PodPhase) v1.PodCondition {
	c := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: PodCompleted}
	if phase == v1.PodFailed {
		c.Reason = PodFailed
	}
	return c
}

func terminalPodReady(phase v1.PodPhase) v1.PodCondition {
	c := terminalContainersReady(phase)
	c.Type = v1.PodReady
	return c
}

// containersReadyCondition is true when every regular container and every
// sidecar is ready. statuses holds init and regular container statuses.
func containersReadyCondition(spec *v1.PodSpec, initStatuses, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	if initStatuses == nil && statuses == nil {
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: UnknownContainerStatuses}
	}
	var unknown, unready []string
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if !podutil.IsRestartableInitContainer(c) {
			continue
		}
		if s := findContainerStatus(initStatuses, c.Name); s == nil {
			unknown = append(unknown, c.Name)
		} else if !s.Ready {
			unready = append(unready, c.Name)
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if s := findContainerStatus(statuses, c.Name); s == nil {
			unknown = append(unknown, c.Name)
		} else if !s.Ready {
			unready = append(unready, c.Name)
		}
	}
	if (phase == v1.PodSucceeded && len(unknown) == 0) || phase == v1.PodFailed {
		return terminalContainersReady(phase)
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, "containers with unknown status: "+nameList(unknown))
	}
	if len(unready) > 0 {
		msgs = append(msgs, "containers with unready status: "+nameList(unready))
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse,
			Reason: ContainersNotReady, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue}
}

// podReadyCondition is ContainersReady further gated by the pod's readiness
// gates, whose conditions others set.
func podReadyCondition(spec *v1.PodSpec, conds []v1.PodCondition, initStatuses, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cr := containersReadyCondition(spec, initStatuses, statuses, phase)
	if cr.Status != v1.ConditionTrue {
		cr.Type = v1.PodReady
		return cr
	}
	var msgs []string
	for _, rg := range spec.ReadinessGates {
		_, c := findCondition(conds, rg.ConditionType)
		if c == nil {
			msgs = append(msgs, "corresponding condition of pod readiness gate \""+string(rg.ConditionType)+"\" does not exist.")
		} else if c.Status != v1.ConditionTrue {
			msgs = append(msgs, "the status of pod readiness gate \""+string(rg.ConditionType)+"\" is not \"True\", but "+string(c.Status))
		}
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse,
			Reason: ReadinessGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
}

// NeedToReconcilePodReadiness reports whether the Ready condition in pod's
// status, as the apiserver has it, is not what its readiness gates and
// container statuses make it, as the kubelet's: a controller changed a gate's
// condition, and the pod must be synced again for its Ready to follow
// (with its containers ready, Ready is True only once every
// spec.readinessGates condition is True). Pods without gates, or without a
// Ready condition yet, need nothing.
func NeedToReconcilePodReadiness(pod *v1.Pod) bool {
	if len(pod.Spec.ReadinessGates) == 0 {
		return false
	}
	_, cur := findCondition(pod.Status.Conditions, v1.PodReady)
	if cur == nil {
		return false
	}
	want := podReadyCondition(&pod.Spec, pod.Status.Conditions, pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.Phase)
	return cur.Status != want.Status || cur.Message != want.Message
}

// initializedCondition is true once every init container has completed (a
// sidecar: started), or once any regular container has started.
func initializedCondition(spec *v1.PodSpec, initStatuses, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	if initStatuses == nil && statuses == nil && len(spec.InitContainers) > 0 {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: UnknownContainerStatuses}
	}
	var unknown, incomplete []string
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		s := findContainerStatus(initStatuses, c.Name)
		switch {
		case s == nil:
			unknown = append(unknown, c.Name)
		case podutil.IsRestartableInitContainer(c):
			if s.Started == nil || !*s.Started {
				incomplete = append(incomplete, c.Name)
			}
		case !s.Ready:
			// A regular init container is ready once it succeeded.
			incomplete = append(incomplete, c.Name)
		}
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue, Reason: PodCompleted}
	}
	if anyRegularStarted(spec, statuses) {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, "containers with unknown status: "+nameList(unknown))
	}
	if len(incomplete) > 0 {
		msgs = append(msgs, "containers with incomplete status: "+nameList(incomplete))
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse,
			Reason: ContainersNotInitialized, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
}

// anyRegularStarted reports whether a regular container has ever run, which
// means the pod has been initialized before (sidecars may be restarting).
func anyRegularStarted(spec *v1.PodSpec, statuses []v1.ContainerStatus) bool {
	for i := range statuses {
		s := &statuses[i]
		if s.State.Running == nil && s.State.Terminated == nil {
			continue
		}
		for j := range spec.Containers {
			if spec.Containers[j].Name == s.Name {
				return true
			}
		}
	}
	return false
}

// setCondition replaces the condition of c's type or appends c.
func setCondition(conds []v1.PodCondition, c v1.PodCondition) []v1.PodCondition {
	if i, _ := findCondition(conds, c.Type); i >= 0 {
		conds[i] = c
		return conds
	}
	return append(conds, c)
}
