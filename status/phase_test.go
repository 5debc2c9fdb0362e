package status

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podutil"
)

func running(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func startedRunning(name string) v1.ContainerStatus {
	s := running(name)
	t := true
	s.Started = &t
	return s
}

func stopped(name string, code int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
}

func waitingStatus(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
}

func restarting(name string, lastCode int32) v1.ContainerStatus {
	s := waitingStatus(name)
	s.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: lastCode}
	return s
}

func phasePod(policy v1.RestartPolicy, init []v1.Container, names ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{RestartPolicy: policy, InitContainers: init}}
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n})
	}
	return p
}

func sidecar(name string) v1.Container {
	always := v1.ContainerRestartPolicyAlways
	return v1.Container{Name: name, RestartPolicy: &always}
}

// withContainerPolicy sets the container-level restartPolicy (and rules)
// of p's container or init container named name.
func withContainerPolicy(p *v1.Pod, name string, policy v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) *v1.Pod {
	// phasePod shares the init containers it is given: copy before changing.
	p.Spec.InitContainers = slices.Clone(p.Spec.InitContainers)
	for _, list := range [][]v1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				list[i].RestartPolicy = &policy
				list[i].RestartPolicyRules = rules
			}
		}
	}
	return p
}

func restartOn(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

func TestGetPhase(t *testing.T) {
	always, never, onFailure := v1.RestartPolicyAlways, v1.RestartPolicyNever, v1.RestartPolicyOnFailure
	cAlways, cNever, cOnFailure := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure
	in, notIn := v1.ContainerRestartRuleOnExitCodesOpIn, v1.ContainerRestartRuleOnExitCodesOpNotIn
	initC := []v1.Container{{Name: "i1"}}
	side := []v1.Container{sidecar("s1")}
	cs := func(s ...v1.ContainerStatus) []v1.ContainerStatus { return s }
	cases := []struct {
		name        string
		pod         *v1.Pod
		init        []v1.ContainerStatus
		regular     []v1.ContainerStatus
		terminal    bool
		initialized bool
		want        v1.PodPhase
	}{
		// RestartPolicy Always.
		{name: "always: all running is Running", pod: phasePod(always, nil, "a", "b"),
			regular: cs(running("a"), running("b")), want: v1.PodRunning},
		{name: "always: all stopped is Running (restarting)", pod: phasePod(always, nil, "a", "b"),
			regular: cs(stopped("a", 0), stopped("b", 1)), want: v1.PodRunning},
		{name: "always: running and stopped is Running", pod: phasePod(always, nil, "a", "b"),
			regular: cs(running("a"), stopped("b", 1)), want: v1.PodRunning},
		{name: "always: a container never started is Pending", pod: phasePod(always, nil, "a", "b"),
			regular: cs(running("a"), waitingStatus("b")), want: v1.PodPending},
		{name: "always: a container restarting is Running", pod: phasePod(always, nil, "a", "b"),
			regular: cs(running("a"), restarting("b", 1)), want: v1.PodRunning},
		{name: "always: a container without status is Pending", pod: phasePod(always, nil, "a", "b"),
			regular: cs(running("a")), want: v1.PodPending},
		{name: "always: terminal pod with all succeeded is Succeeded", pod: phasePod(always, nil, "a", "b"),
			regular: cs(stopped("a", 0), stopped("b", 0)), terminal: true, want: v1.PodSucceeded},
		{name: "always: terminal pod with a failure is Failed", pod: phasePod(always, nil, "a", "b"),
			regular: cs(stopped("a", 0), stopped("b", 2)), terminal: true, want: v1.PodFailed},
		// RestartPolicy Never.
		{name: "never: all succeeded is Succeeded", pod: phasePod(never, nil, "a", "b"),
			regular: cs(stopped("a", 0), stopped("b", 0)), want: v1.PodSucceeded},
		{name: "never: one failed is Failed", pod: phasePod(never, nil, "a", "b"),
			regular: cs(stopped("a", 0), stopped("b", 1)), want: v1.PodFailed},
		{name: "never: one still running is Running", pod: phasePod(never, nil, "a", "b"),
			regular: cs(running("a"), stopped("b", 1)), want: v1.PodRunning},
		{name: "never: one waiting is Pending", pod: phasePod(never, nil, "a", "b"),
			regular: cs(waitingStatus("a"), stopped("b", 0)), want: v1.PodPending},
		// RestartPolicy OnFailure.
		{name: "onfailure: all succeeded is Succeeded", pod: phasePod(onFailure, nil, "a", "b"),
			regular: cs(stopped("a", 0), stopped("b", 0)), want: v1.PodSucceeded},
		{name: "onfailure: a failure is Running (restarting)", pod: phasePod(onFailure, nil, "a", "b"),
			regular: cs(stopped("a", 0), stopped("b", 1)), want: v1.PodRunning},
		{name: "onfailure: a container restarting after failure is Running", pod: phasePod(onFailure, nil, "a"),
			regular: cs(restarting("a", 1)), want: v1.PodRunning},
		// Init containers.
		{name: "init container running is Pending", pod: phasePod(always, initC, "a"),
			init: cs(running("i1")), regular: cs(waitingStatus("a")), want: v1.PodPending},
		{name: "init container without status is Pending", pod: phasePod(always, initC, "a"),
			regular: cs(waitingStatus("a")), want: v1.PodPending},
		{name: "init container failed under Never is Failed", pod: phasePod(never, initC, "a"),
			init: cs(stopped("i1", 1)), regular: cs(waitingStatus("a")), want: v1.PodFailed},
		{name: "init container failed and restarting under Never is Failed", pod: phasePod(never, initC, "a"),
			init: cs(restarting("i1", 1)), regular: cs(waitingStatus("a")), want: v1.PodFailed},
		{name: "init container failed under Always is Pending", pod: phasePod(always, initC, "a"),
			init: cs(restarting("i1", 1)), regular: cs(waitingStatus("a")), want: v1.PodPending},
		{name: "init container done and regular running is Running", pod: phasePod(always, initC, "a"),
			init: cs(stopped("i1", 0)), regular: cs(running("a")), want: v1.PodRunning},
		// Sidecars (restartable init containers).
		{name: "sidecar running but not started is Pending", pod: phasePod(always, side, "a"),
			init: cs(running("s1")), regular: cs(waitingStatus("a")), want: v1.PodPending},
		{name: "sidecar started and regular running is Running", pod: phasePod(always, side, "a"),
			init: cs(startedRunning("s1")), regular: cs(running("a")), want: v1.PodRunning},
		{name: "sidecar restarting in an initialized pod is Running", pod: phasePod(always, side, "a"),
			init: cs(running("s1")), regular: cs(running("a")), initialized: true, want: v1.PodRunning},
		{name: "sidecar restarting in a new sandbox is Pending", pod: phasePod(always, side, "a"),
			init: cs(running("s1")), regular: cs(running("a")), want: v1.PodPending},
		{name: "stopped sidecar and succeeded containers under Never is Succeeded", pod: phasePod(never, side, "a"),
			init: cs(stopped("s1", 137)), regular: cs(stopped("a", 0)), want: v1.PodSucceeded},
		{name: "sidecar running and containers succeeded under Never is Running", pod: phasePod(never, side, "a"),
			init: cs(startedRunning("s1")), regular: cs(stopped("a", 0)), want: v1.PodRunning},
		{name: "sidecar without status is Pending", pod: phasePod(always, side, "a"),
			regular: cs(running("a")), want: v1.PodPending},
		// Container-level restart policies and rules (ContainerRestartRules).
		{name: "container Never under pod Always: failed is Failed", pod: withContainerPolicy(phasePod(always, nil, "a"), "a", cNever),
			regular: cs(stopped("a", 1)), want: v1.PodFailed},
		{name: "container Never under pod Always: succeeded is Succeeded", pod: withContainerPolicy(phasePod(always, nil, "a"), "a", cNever),
			regular: cs(stopped("a", 0)), want: v1.PodSucceeded},
		{name: "container Never beside a restarting one under pod Always is Running", pod: withContainerPolicy(phasePod(always, nil, "a", "b"), "a", cNever),
			regular: cs(stopped("a", 1), restarting("b", 1)), want: v1.PodRunning},
		{name: "container Always under pod Never: failed is Running (restarting)", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cAlways),
			regular: cs(stopped("a", 1)), want: v1.PodRunning},
		{name: "container Always under pod Never: restarting is Running", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cAlways),
			regular: cs(restarting("a", 1)), want: v1.PodRunning},
		{name: "container OnFailure under pod Never: failed is Running (restarting)", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cOnFailure),
			regular: cs(stopped("a", 1)), want: v1.PodRunning},
		{name: "container OnFailure under pod Never: succeeded is Succeeded", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cOnFailure),
			regular: cs(stopped("a", 0)), want: v1.PodSucceeded},
		{name: "rule In matching the exit code restarts: Running", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cNever, restartOn(in, 42)),
			regular: cs(stopped("a", 42)), want: v1.PodRunning},
		{name: "rule In not matching falls back to container Never: Failed", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cNever, restartOn(in, 42)),
			regular: cs(stopped("a", 1)), want: v1.PodFailed},
		{name: "rule NotIn matching restarts: Running", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cNever, restartOn(notIn, 0)),
			regular: cs(restarting("a", 3)), want: v1.PodRunning},
		{name: "rule NotIn not matching falls back to container Never: Succeeded", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cNever, restartOn(notIn, 0)),
			regular: cs(stopped("a", 0)), want: v1.PodSucceeded},
		{name: "terminal pod with a restartable container is Failed", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cAlways),
			regular: cs(stopped("a", 1)), terminal: true, want: v1.PodFailed},
		{name: "init container OnFailure under pod Never: failed is Pending (restarting)", pod: withContainerPolicy(phasePod(never, initC, "a"), "i1", cOnFailure),
			init: cs(restarting("i1", 1)), regular: cs(waitingStatus("a")), want: v1.PodPending},
		{name: "init container Never under pod Always: failed is Failed", pod: withContainerPolicy(phasePod(always, []v1.Container{{Name: "i1"}}, "a"), "i1", cNever),
			init: cs(stopped("i1", 1)), regular: cs(waitingStatus("a")), want: v1.PodFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, getPhase(tc.pod, tc.init, tc.regular, tc.terminal, tc.initialized))
		})
	}

	t.Run("terminal static pod is not made terminal", func(t *testing.T) {
		p := phasePod(always, nil, "a")
		p.Annotations = map[string]string{podutil.ConfigSourceAnnotationKey: podutil.FileSource}
		assert.Equal(t, v1.PodRunning, getPhase(p, nil, cs(stopped("a", 0)), true, false))
	})
}

func TestCheckContainerTransitions(t *testing.T) {
	never, onFailure := v1.RestartPolicyNever, v1.RestartPolicyOnFailure
	cAlways, cNever, cOnFailure := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure
	in := v1.ContainerRestartRuleOnExitCodesOpIn
	cases := []struct {
		name    string
		pod     *v1.Pod
		old     v1.ContainerStatus
		illegal bool
	}{
		{name: "pod Never: a failed container may not run again", pod: phasePod(never, nil, "a"), old: stopped("a", 1), illegal: true},
		{name: "pod OnFailure: a failed container may run again", pod: phasePod(onFailure, nil, "a"), old: stopped("a", 1)},
		{name: "pod OnFailure: a succeeded container may not run again", pod: phasePod(onFailure, nil, "a"), old: stopped("a", 0), illegal: true},
		{name: "container Always under pod Never may run again", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cAlways), old: stopped("a", 0)},
		{name: "container OnFailure under pod Never may run again after a failure", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cOnFailure), old: stopped("a", 1)},
		{name: "container Never with a matching Restart rule may run again", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cNever, restartOn(in, 42)), old: stopped("a", 42)},
		{name: "container Never with no matching rule may not run again", pod: withContainerPolicy(phasePod(never, nil, "a"), "a", cNever, restartOn(in, 42)), old: stopped("a", 1), illegal: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{tc.old}}
			next := &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{running("a")}}
			err := checkContainerTransitions(old, next, &tc.pod.Spec)
			if tc.illegal {
				assert.ErrorContains(t, err, "illegal transition")
			} else {
				assert.NoError(t, err)
			}
		})
	}
	t.Run("a sidecar may always run again", func(t *testing.T) {
		p := phasePod(never, []v1.Container{sidecar("s1")}, "a")
		old := &v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{stopped("s1", 137)}}
		next := &v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{running("s1")}}
		assert.NoError(t, checkContainerTransitions(old, next, &p.Spec))
	})
}
