package cri_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

func TestExecSync(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("exec", "busybox:1")
	require.NoError(t, e.sync(t, pod, nil).Error())
	id := e.status(t, pod).FindContainerStatusByName("main").ID

	e.srv.SetExecResult("main", []string{"cat", "/ready"}, fakecri.ExecResult{Stdout: "o", Stderr: "e", ExitCode: 3})
	out, errOut, code, err := e.m.ExecSync(e.ctx, id, []string{"cat", "/ready"}, time.Second)
	require.NoError(t, err)
	require.Equal(t, "o", string(out))
	require.Equal(t, "e", string(errOut))
	require.Equal(t, 3, code)

	e.srv.SetExecResult("main", []string{"sleep"}, fakecri.ExecResult{Hang: true})
	_, _, _, err = e.m.ExecSync(e.ctx, id, []string{"sleep"}, time.Second)
	require.ErrorIs(t, err, runtime.ErrExecTimeout)

	_, _, _, err = e.m.ExecSync(e.ctx, runtime.ContainerID{Type: "containerd", ID: "nope"}, []string{"x"}, time.Second)
	require.ErrorIs(t, err, runtime.ErrNotFound)
}
