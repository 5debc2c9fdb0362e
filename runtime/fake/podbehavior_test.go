package fake_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

// PodBehavior programs containers per pod, ahead of name and image.
func TestPodBehaviorWinsOverNameAndImage(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{PodBehavior: func(pod *v1.Pod, c *v1.Container) (fake.Behavior, bool) {
		if pod.Annotations["exit"] == "" {
			return fake.Behavior{}, false
		}
		return fake.Behavior{Exit: true, ExitAfter: time.Second, ExitCode: 3}, true
	}})
	rt.SetContainerBehavior("app", fake.Behavior{Exit: true, ExitAfter: time.Hour})
	scripted := newPod("scripted", v1.RestartPolicyNever, ctr("app"))
	scripted.Annotations = map[string]string{"exit": "yes"}
	plain := newPod("plain", v1.RestartPolicyNever, ctr("app"))
	require.NoError(t, sync(t, rt, scripted, nil).Error())
	require.NoError(t, sync(t, rt, plain, nil).Error())
	clk.Step(time.Second)
	require.Equal(t, runtime.ContainerStateExited, newest(t, rt, scripted, "app").State)
	require.Equal(t, 3, newest(t, rt, scripted, "app").ExitCode)
	require.Equal(t, runtime.ContainerStateRunning, newest(t, rt, plain, "app").State, "the name's behaviour applies to pods PodBehavior declines")
}

// ReadyAfter fails unprogrammed commands (exec probes) until the container
// has run that long.
func TestReadyAfterFailsExecUntilDue(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{})
	rt.SetContainerBehavior("app", fake.Behavior{ReadyAfter: 5 * time.Second})
	pod := newPod("slow", v1.RestartPolicyAlways, ctr("app"))
	require.NoError(t, sync(t, rt, pod, nil).Error())
	id := newest(t, rt, pod, "app").ID
	exec := func() int {
		_, _, code, err := rt.ExecSync(context.Background(), id, []string{"ready"}, time.Second)
		require.NoError(t, err)
		return code
	}
	require.Equal(t, 1, exec(), "before ReadyAfter")
	clk.Step(4 * time.Second)
	require.Equal(t, 1, exec(), "1s before ReadyAfter")
	clk.Step(time.Second)
	require.Equal(t, 0, exec(), "at ReadyAfter")
}
