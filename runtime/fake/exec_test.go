package fake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

func TestExecSync(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{})
	pod := newPod("exec", v1.RestartPolicyAlways, ctr("app"), ctr("other"))
	require.NoError(t, sync(t, rt, pod, nil).Error())
	app := newest(t, rt, pod, "app").ID
	other := newest(t, rt, pod, "other").ID
	ctx := context.Background()

	rt.SetExecResult("app", []string{"cat", "/ready"}, fake.ExecResult{Stdout: "no", Stderr: "e", ExitCode: 1})
	rt.SetExecResult("app", nil, fake.ExecResult{Stdout: "any"})

	t.Run("a programmed command gives its output and exit code", func(t *testing.T) {
		out, errOut, code, err := rt.ExecSync(ctx, app, []string{"cat", "/ready"}, time.Second)
		require.NoError(t, err)
		require.Equal(t, "no", string(out))
		require.Equal(t, "e", string(errOut))
		require.Equal(t, 1, code)
	})
	t.Run("other commands of the container get its catch-all", func(t *testing.T) {
		out, _, code, err := rt.ExecSync(ctx, app, []string{"true"}, time.Second)
		require.NoError(t, err)
		require.Equal(t, "any", string(out))
		require.Zero(t, code)
	})
	t.Run("unprogrammed containers exit 0", func(t *testing.T) {
		_, _, code, err := rt.ExecSync(ctx, other, []string{"cat", "/ready"}, time.Second)
		require.NoError(t, err)
		require.Zero(t, code)
	})
	t.Run("a hanging command times out on the clock", func(t *testing.T) {
		rt.SetExecResult("other", []string{"sleep"}, fake.ExecResult{Hang: true})
		done := make(chan error, 1)
		go func() { _, _, _, err := rt.ExecSync(ctx, other, []string{"sleep"}, 2*time.Second); done <- err }()
		require.Eventually(t, clk.HasWaiters, 30*time.Second, time.Millisecond) // a guard only
		clk.Step(2 * time.Second)
		err := <-done
		require.True(t, errors.Is(err, runtime.ErrExecTimeout), "%v", err)
	})
	t.Run("an unknown container is not found", func(t *testing.T) {
		_, _, _, err := rt.ExecSync(ctx, runtime.ContainerID{Type: "fake", ID: "nope"}, []string{"x"}, time.Second)
		require.ErrorIs(t, err, runtime.ErrNotFound)
	})
	t.Run("an exited container cannot exec", func(t *testing.T) {
		require.NoError(t, rt.ExitContainer(pod.UID, "app", 1, "Error"))
		_, _, _, err := rt.ExecSync(ctx, app, []string{"x"}, time.Second)
		require.ErrorContains(t, err, "not running")
	})
	// Calls that found a running container are recorded.
	require.Equal(t, 4, rt.CallCount("ExecSync"))
}
