package fake_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

func TestContainerLogs(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{})
	rt.SetContainerBehavior("app", fake.Behavior{Logs: []string{"starting", "listening on :8080"}})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
	require.NoError(t, sync(t, rt, pod, nil).Error())
	id := newest(t, rt, pod, "app").ID
	ctx := context.Background()

	clk.Step(time.Second)
	require.NoError(t, rt.WriteLog(pod.UID, "app", "stderr", "a warning"))
	var out, errs bytes.Buffer
	require.NoError(t, rt.GetContainerLogs(ctx, pod, id, &v1.PodLogOptions{}, &out, &errs))
	assert.Equal(t, "starting\nlistening on :8080\n", out.String(), "the lines of Behavior.Logs, printed at start")
	assert.Equal(t, "a warning\n", errs.String())

	out.Reset()
	require.NoError(t, rt.GetContainerLogs(ctx, pod, id, &v1.PodLogOptions{TailLines: ptr.To[int64](1), Timestamps: true}, &out, &out))
	assert.Equal(t, t0.Add(time.Second).Format(time.RFC3339Nano)+" a warning\n", out.String())

	// follow until the container exits
	var followed testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- rt.GetContainerLogs(ctx, pod, id, &v1.PodLogOptions{Follow: true, TailLines: ptr.To[int64](0)}, &followed, &followed)
	}()
	require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond, "the follower polls")
	require.NoError(t, rt.WriteLog(pod.UID, "app", "stdout", "later"))
	require.Eventually(t, func() bool { clk.Step(time.Second); return followed.String() == "later\n" }, 10*time.Second, time.Millisecond)
	require.NoError(t, rt.ExitContainer(pod.UID, "app", 0, ""))
	require.Eventually(t, func() bool {
		clk.Step(time.Second)
		select {
		case err := <-done:
			require.NoError(t, err)
			return true
		default:
			return false
		}
	}, 10*time.Second, time.Millisecond)

	err := rt.GetContainerLogs(ctx, pod, runtime.ContainerID{Type: rt.Type(), ID: "nope"}, nil, &out, &out)
	assert.ErrorIs(t, err, runtime.ErrNotFound)
	assert.ErrorIs(t, rt.WriteLog(pod.UID, "app", "stdout", "x"), runtime.ErrNotFound, "the container no longer runs")
	assert.ErrorIs(t, rt.WriteLog(pod.UID, "app", "stdlog", "x"), runtime.ErrInvalidConfig)
}
