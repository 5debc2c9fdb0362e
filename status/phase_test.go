package status

import (
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

func TestGetPhase(t *testing.T) {
	always, never, onFailure := v1.RestartPolicyAlways, v1.RestartPolicyNever, v1.RestartPolicyOnFailure
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
