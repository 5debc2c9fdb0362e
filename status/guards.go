package status

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podutil"
)

// checkContainerTransitions refuses a status in which a container that
// terminated for good (by its restart rules and policies) runs or waits
// again: that is a bug in the caller, and reporting it would let a run-once
// container run twice. As the kubelet's, it trusts a pod restartPolicy
// Always.
func checkContainerTransitions(old, status *v1.PodStatus, spec *v1.PodSpec) error {
	if spec.RestartPolicy == v1.RestartPolicyAlways {
		return nil
	}
	check := func(olds, news []v1.ContainerStatus, containers []v1.Container) error {
		for i := range olds {
			o := &olds[i]
			if o.State.Terminated == nil {
				continue
			}
			if c := findContainer(containers, o.Name); c != nil &&
				(podutil.IsRestartableInitContainer(c) || podutil.ContainerShouldRestart(c, spec, o.State.Terminated.ExitCode)) {
				continue
			}
			if n := findContainerStatus(news, o.Name); n != nil && n.State.Terminated == nil {
				return fmt.Errorf("terminated container %q attempted illegal transition to non-terminated state", o.Name)
			}
		}
		return nil
	}
	if err := check(old.ContainerStatuses, status.ContainerStatuses, spec.Containers); err != nil {
		return err
	}
	return check(old.InitContainerStatuses, status.InitContainerStatuses, spec.InitContainers)
}

func findContainer(containers []v1.Container, name string) *v1.Container {
	for i := range containers {
		if containers[i].Name == name {
			return &containers[i]
		}
	}
	return nil
}

// statusEqual reports whether two statuses are the same in what the agent
// owns: conditions of others are ignored, the agent's compared without
// their times.
func statusEqual(old, status *v1.PodStatus) bool {
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if !ownedByAgent(c.Type) && !sharedWithAgent(c.Type) {
			continue
		}
		_, oc := findCondition(old.Conditions, c.Type)
		if oc == nil || oc.Status != c.Status || oc.Message != c.Message || oc.Reason != c.Reason {
			return false
		}
	}
	o := *old
	o.Conditions = status.Conditions
	// Both sides are normalized by the Manager, so plain equality holds
	// where semantic equality does; a false "different" costs one sync that
	// finds nothing to patch.
	return reflect.DeepEqual(&o, status)
}

// normalizeStatus brings status to what the apiserver would store, so that
// comparisons with it hold: times to whole seconds (RFC 3339), termination
// messages capped so that all of a pod's fit in 12 KiB, container statuses
// sorted (regular and ephemeral by name, init in spec order).
func normalizeStatus(pod *v1.Pod, status *v1.PodStatus) {
	perContainer := maxTerminationMessageBytes
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers); n > 0 {
		perContainer /= n
	}
	// Whole seconds in local time: what an RFC 3339 round trip through the
	// apiserver gives (metav1.Time decodes to local time), so that plain
	// equality with the apiserver's status mostly holds.
	norm := func(t *metav1.Time) {
		if !t.IsZero() {
			t.Time = time.Unix(t.Unix(), 0)
		}
	}
	state := func(s *v1.ContainerState) {
		if s.Running != nil {
			norm(&s.Running.StartedAt)
		}
		if t := s.Terminated; t != nil {
			norm(&t.StartedAt)
			norm(&t.FinishedAt)
			if len(t.Message) > perContainer {
				t.Message = t.Message[:perContainer]
			}
		}
	}
	if status.StartTime != nil {
		norm(status.StartTime)
	}
	for i := range status.Conditions {
		norm(&status.Conditions[i].LastProbeTime)
		norm(&status.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]v1.ContainerStatus{status.ContainerStatuses, status.InitContainerStatuses, status.EphemeralContainerStatuses} {
		for i := range list {
			state(&list[i].State)
			state(&list[i].LastTerminationState)
		}
	}
	byName := func(a, b v1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) }
	slices.SortStableFunc(status.ContainerStatuses, byName)
	slices.SortStableFunc(status.EphemeralContainerStatuses, byName)
	// Init containers in spec order; statuses of unknown names go last.
	cur := 0
	for i := range pod.Spec.InitContainers {
		for j := cur; j < len(status.InitContainerStatuses); j++ {
			if status.InitContainerStatuses[j].Name == pod.Spec.InitContainers[i].Name {
				s := status.InitContainerStatuses
				s[cur], s[j] = s[j], s[cur]
				cur++
				break
			}
		}
	}
}

// mergePodStatus merges the agent's status into the apiserver's: the
// conditions of others are kept, the agent's replace the apiserver's. With
// delayTerminal (containers may still run) a terminal phase is held back.
// A terminal phase turns Ready and ContainersReady false. Neither argument
// is modified.
func mergePodStatus(api, status *v1.PodStatus, delayTerminal bool, now metav1.Time) v1.PodStatus {
	out := *status
	conds := make([]v1.PodCondition, 0, len(api.Conditions)+len(status.Conditions))
	for _, c := range api.Conditions {
		if !ownedByAgent(c.Type) {
			conds = append(conds, c)
		}
	}
	toTerminal := !isTerminalPhase(api.Phase) && isTerminalPhase(status.Phase)
	for _, c := range status.Conditions {
		switch {
		case ownedByAgent(c.Type):
			conds = append(conds, c)
		case sharedWithAgent(c.Type):
			// Sent only with the terminal phase, so that the condition does
			// not announce a transition that is being held back.
			if toTerminal && !delayTerminal {
				if _, ac := findCondition(api.Conditions, c.Type); ac == nil || ac.Status != c.Status {
					c.LastTransitionTime = now
				} else {
					c.LastTransitionTime = ac.LastTransitionTime
				}
				conds = setCondition(conds, c)
			}
		}
	}
	out.Conditions = conds
	if toTerminal && delayTerminal {
		out.Phase, out.Reason, out.Message = api.Phase, api.Reason, api.Message
	}
	if isTerminalPhase(out.Phase) && (conditionTrue(out.Conditions, v1.PodReady) || conditionTrue(out.Conditions, v1.ContainersReady)) {
		// The prober may not have caught up; a finished pod is not ready.
		cr := terminalContainersReady(out.Phase)
		pr := terminalPodReady(out.Phase)
		cr.LastTransitionTime, pr.LastTransitionTime = now, now
		out.Conditions = setCondition(out.Conditions, cr)
		out.Conditions = setCondition(out.Conditions, pr)
	}
	return out
}

func conditionTrue(conds []v1.PodCondition, t v1.PodConditionType) bool {
	_, c := findCondition(conds, t)
	return c != nil && c.Status == v1.ConditionTrue
}
