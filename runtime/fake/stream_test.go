package fake_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

func TestExecSession(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	pod := newPod("exec", v1.RestartPolicyAlways, ctr("app"))
	require.NoError(t, sync(t, rt, pod, nil).Error())
	app := newest(t, rt, pod, "app").ID
	rt.SetExecResult("app", []string{"sh"}, fake.ExecResult{Stdout: "$ ", Stderr: "bye\n", ExitCode: 2, EchoStdin: true})
	ctx := t.Context()

	for _, tc := range []struct {
		name           string
		tty            bool
		stdout, stderr string
	}{
		{"stdin echoed between stdout and stderr, exit code as an ExitError", false, "$ ls\n", "bye\n"},
		{"with a tty stderr goes to stdout", true, "$ ls\nbye\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			s := runtime.AttachIO{Stdin: strings.NewReader("ls\n"), Stdout: &out, TTY: tc.tty}
			if !tc.tty {
				s.Stderr = &errOut
			}
			err := rt.Exec(ctx, pod, app, []string{"sh"}, s)
			var exit utilexec.ExitError
			require.ErrorAs(t, err, &exit)
			assert.Equal(t, 2, exit.ExitStatus())
			assert.Equal(t, tc.stdout, out.String())
			assert.Equal(t, tc.stderr, errOut.String())
		})
	}
	t.Run("an unprogrammed command exits 0", func(t *testing.T) {
		var out bytes.Buffer
		require.NoError(t, rt.Exec(ctx, pod, app, []string{"true"}, runtime.AttachIO{Stdout: &out}))
		assert.Empty(t, out.String())
	})
	t.Run("a hanging command runs until ctx ends", func(t *testing.T) {
		rt.SetExecResult("app", []string{"sleep"}, fake.ExecResult{Hang: true})
		c, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		assert.ErrorIs(t, rt.Exec(c, pod, app, []string{"sleep"}, runtime.AttachIO{}), context.DeadlineExceeded)
	})
	t.Run("an unknown container is not found", func(t *testing.T) {
		err := rt.Exec(ctx, pod, runtime.ContainerID{Type: "fake", ID: "nope"}, []string{"x"}, runtime.AttachIO{})
		assert.ErrorIs(t, err, runtime.ErrNotFound)
	})
	assert.Equal(t, 4, rt.CallCount("Exec"))
}

func TestAttachStreamsNewLogLinesUntilTheContainerStops(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	app := ctr("app")
	app.Stdin = true
	pod := newPod("attach", v1.RestartPolicyNever, app)
	require.NoError(t, sync(t, rt, pod, nil).Error())
	require.NoError(t, rt.WriteLog(pod.UID, "app", "stdout", "before the attach"))
	id := newest(t, rt, pod, "app").ID

	stdinR, stdinW := io.Pipe()
	var out, errOut testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- rt.Attach(t.Context(), pod, id, runtime.AttachIO{Stdin: stdinR, Stdout: &out, Stderr: &errOut})
	}()
	require.Eventually(t, func() bool { return rt.CallCount("Attach") == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, rt.WriteLog(pod.UID, "app", "stdout", "one"))
	require.NoError(t, rt.WriteLog(pod.UID, "app", "stderr", "two"))
	_, err := stdinW.Write([]byte("typed\n")) // echoed: the spec has stdin
	require.NoError(t, err)
	require.Eventually(t, func() bool { return out.String() == "one\ntyped\n" && errOut.String() == "two\n" }, 10*time.Second, time.Millisecond,
		"stdout %q, stderr %q", out.String(), errOut.String())
	require.NoError(t, rt.ExitContainer(pod.UID, "app", 0, "Completed"))
	require.NoError(t, <-done)
	require.NoError(t, stdinW.Close())
}

func TestAttachEndsWithItsContext(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	pod := newPod("attach", v1.RestartPolicyAlways, ctr("app"))
	require.NoError(t, sync(t, rt, pod, nil).Error())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- rt.Attach(ctx, pod, newest(t, rt, pod, "app").ID, runtime.AttachIO{Stdout: io.Discard})
	}()
	require.Eventually(t, func() bool { return rt.CallCount("Attach") == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	assert.NoError(t, <-done)
}

func TestPortForwardReachesTheInMemoryNetwork(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	pod := newPod("web", v1.RestartPolicyAlways, withPort(ctr("app"), 8080))
	require.NoError(t, sync(t, rt, pod, nil).Error())

	t.Run("a listening port answers HTTP", func(t *testing.T) {
		client, server := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- rt.PortForward(t.Context(), pod, 8080, server) }()
		_, err := io.WriteString(client, "GET / HTTP/1.1\r\nHost: web\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(client), nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 2))
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "ok", string(body))
		require.NoError(t, <-done)         // the pod closed its side
		require.NoError(t, server.Close()) // as the kubelet API closes the stream
		require.NoError(t, client.Close())
	})
	t.Run("an unknown pod is not found", func(t *testing.T) {
		other := newPod("other", v1.RestartPolicyAlways, ctr("app"))
		client, server := net.Pipe()
		defer client.Close()
		assert.ErrorIs(t, rt.PortForward(t.Context(), other, 8080, server), runtime.ErrNotFound)
	})
	t.Run("a port nobody listens on is refused", func(t *testing.T) {
		require.NoError(t, rt.ExitContainer(pod.UID, "app", 0, "Completed"))
		client, server := net.Pipe()
		defer client.Close()
		err := rt.PortForward(t.Context(), pod, 8080, server)
		assert.ErrorContains(t, err, "connection refused")
	})
}
