package cri_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// streamPod runs a pod on the fake and returns its main container's ID and
// its sandbox's.
func streamPod(t *testing.T, e *fakeEnv, name string) (runtime.ContainerID, string) {
	t.Helper()
	pod := newPod(name, "busybox:1")
	require.NoError(t, e.sync(t, pod, nil).Error())
	st := e.status(t, pod)
	return st.FindContainerStatusByName("main").ID, st.SandboxStatuses[0].ID
}

func TestStreamURLsPointAtTheRuntimesStreamingServer(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("urls", "busybox:1")
	id, sandbox := streamPod(t, e, "urls")
	base := e.srv.StreamingURL()

	u, err := e.m.GetExecURL(e.ctx, pod, runtime.ExecRequest{ContainerID: id, Cmd: []string{"ls"}, Stdout: true})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(u.String(), base+"/exec/"), u.String())

	u2, err := e.m.GetExecURL(e.ctx, pod, runtime.ExecRequest{ContainerID: id, Cmd: []string{"ls"}, Stdout: true})
	require.NoError(t, err)
	require.NotEqual(t, u.String(), u2.String(), "each session has a URL of its own")

	u, err = e.m.GetAttachURL(e.ctx, pod, runtime.ExecRequest{ContainerID: id, Stdin: true, Stdout: true})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(u.String(), base+"/attach/"), u.String())

	u, err = e.m.GetPortForwardURL(e.ctx, pod, sandbox, []int32{80})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(u.String(), base+"/portforward/"), u.String())

	// Without a sandbox ID, the pod's sandbox is found by its UID.
	e.srv.ResetCalls()
	u, err = e.m.GetPortForwardURL(e.ctx, pod, "", nil)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(u.String(), base+"/portforward/"), u.String())
	require.Equal(t, 1, e.srv.Calls("ListPodSandbox"))
}

func TestStreamRequestsWithTTYDoNotAskForStderr(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("tty", "busybox:1")
	id, _ := streamPod(t, e, "tty")
	// The CRI forbids a TTY with stderr, and the fake refuses it as
	// containerd does; the kubelet merges stderr into the terminal.
	_, err := e.m.GetExecURL(e.ctx, pod, runtime.ExecRequest{ContainerID: id, Cmd: []string{"sh"}, Stdin: true, Stdout: true, Stderr: true, TTY: true})
	require.NoError(t, err)
	_, err = e.m.GetAttachURL(e.ctx, pod, runtime.ExecRequest{ContainerID: id, Stdout: true, Stderr: true, TTY: true})
	require.NoError(t, err)
}

func TestStreamURLErrors(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("errs", "busybox:1")
	id, sandbox := streamPod(t, e, "errs")
	gone := runtime.ContainerID{Type: id.Type, ID: "gone"}
	exec := func(req runtime.ExecRequest) error {
		_, err := e.m.GetExecURL(e.ctx, pod, req)
		return err
	}
	attach := func(req runtime.ExecRequest) error {
		_, err := e.m.GetAttachURL(e.ctx, pod, req)
		return err
	}
	forward := func(sb string, ports ...int32) func() error {
		return func() error { _, err := e.m.GetPortForwardURL(e.ctx, pod, sb, ports); return err }
	}
	for _, tc := range []struct {
		name   string
		call   func() error
		is     error
		says   string
		called bool // whether the runtime was asked
	}{
		{"exec without a command", func() error { return exec(runtime.ExecRequest{ContainerID: id, Stdout: true}) }, nil, "no command", false},
		{"exec without streams", func() error { return exec(runtime.ExecRequest{ContainerID: id, Cmd: []string{"ls"}}) }, nil, "one of stdin, stdout and stderr", false},
		{"exec without a container ID", func() error { return exec(runtime.ExecRequest{Cmd: []string{"ls"}, Stdout: true}) }, runtime.ErrInvalidContainerID, "", false},
		{"exec in a container the runtime does not know", func() error { return exec(runtime.ExecRequest{ContainerID: gone, Cmd: []string{"ls"}, Stdout: true}) }, runtime.ErrNotFound, "gone", true},
		{"attach without streams", func() error { return attach(runtime.ExecRequest{ContainerID: id}) }, nil, "one of stdin, stdout and stderr", false},
		{"attach to a container the runtime does not know", func() error { return attach(runtime.ExecRequest{ContainerID: gone, Stdout: true}) }, runtime.ErrNotFound, "gone", true},
		{"port-forward to port 0", forward(sandbox, 80, 0), nil, "port 0 out of range", false},
		{"port-forward to a port over 65535", forward(sandbox, 65536), nil, "port 65536 out of range", false},
		{"port-forward to a sandbox the runtime does not know", forward("gone", 80), runtime.ErrNotFound, "gone", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.srv.ResetCalls()
			err := tc.call()
			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			require.Contains(t, err.Error(), tc.says)
			calls := e.srv.Calls("Exec") + e.srv.Calls("Attach") + e.srv.Calls("PortForward")
			require.Equal(t, tc.called, calls > 0, "runtime called")
		})
	}

	t.Run("port-forward to a pod without a sandbox", func(t *testing.T) {
		other := newPod("nosandbox", "busybox:1")
		_, err := e.m.GetPortForwardURL(e.ctx, other, "", []int32{80})
		require.ErrorIs(t, err, runtime.ErrNotFound)
		_, err = e.m.GetPortForwardURL(e.ctx, nil, "", []int32{80})
		require.ErrorContains(t, err, "neither a sandbox ID nor a pod UID")
	})
	t.Run("a runtime without streaming", func(t *testing.T) {
		e.srv.FailNext("Exec", status.Error(codes.Unimplemented, "no streaming"))
		err := exec(runtime.ExecRequest{ContainerID: id, Cmd: []string{"ls"}, Stdout: true})
		require.ErrorIs(t, err, runtime.ErrNotSupported)
	})
	t.Run("a runtime failing", func(t *testing.T) {
		e.srv.FailNext("Attach", errors.New("streaming server down"))
		err := attach(runtime.ExecRequest{ContainerID: id, Stdout: true})
		require.ErrorContains(t, err, "streaming server down")
	})
}

func TestStreamURLsTheProxyCannotReachAreErrors(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("badurl", "busybox:1")
	id, _ := streamPod(t, e, "badurl")
	for _, tc := range []struct{ url, says string }{
		{"", "returned no URL"},
		{"/exec/abc", "want an absolute http(s) URL"},
		{"127.0.0.1:1234/exec/abc", "bad URL"},
		{"unix:///run/cri.sock", "want an absolute http(s) URL"},
		{"http:///exec/abc", "want an absolute http(s) URL"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			e.srv.SetResponseRewrite("Exec", func(any) any { return &runtimeapi.ExecResponse{Url: tc.url} })
			defer e.srv.SetResponseRewrite("Exec", nil)
			_, err := e.m.GetExecURL(e.ctx, pod, runtime.ExecRequest{ContainerID: id, Cmd: []string{"ls"}, Stdout: true})
			require.ErrorContains(t, err, tc.says)
		})
	}
}

func TestStreamCallsAreCountedAsTheKubelets(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	opts, err := cri.MetricsDialOptions(reg)
	require.NoError(t, err)
	e := newFakeEnv(t, func(c *cri.Config) { c.DialOptions = append(c.DialOptions, opts...) })
	pod := newPod("counted", "busybox:1")
	id, sandbox := streamPod(t, e, "counted")
	_, err = e.m.GetExecURL(e.ctx, pod, runtime.ExecRequest{ContainerID: id, Cmd: []string{"ls"}, Stdout: true})
	require.NoError(t, err)
	_, err = e.m.GetAttachURL(e.ctx, pod, runtime.ExecRequest{ContainerID: id, Stdout: true})
	require.NoError(t, err)
	_, err = e.m.GetAttachURL(e.ctx, pod, runtime.ExecRequest{ContainerID: runtime.ContainerID{ID: "gone"}, Stdout: true})
	require.Error(t, err)
	_, err = e.m.GetPortForwardURL(e.ctx, pod, sandbox, []int32{80})
	require.NoError(t, err)

	mfs, err := reg.Gather()
	require.NoError(t, err)
	byOp := func(name string) map[string]float64 {
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
		return out
	}
	ops, errs := byOp("kubelet_runtime_operations_total"), byOp("kubelet_runtime_operations_errors_total")
	require.Equal(t, 1.0, ops["exec"])
	require.Equal(t, 2.0, ops["attach"])
	require.Equal(t, 1.0, ops["port_forward"])
	require.Equal(t, 1.0, errs["attach"], "the attach to a container that is gone")
	require.Equal(t, 0.0, errs["exec"]+errs["port_forward"])
}
