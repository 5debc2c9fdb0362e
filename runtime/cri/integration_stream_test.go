package cri_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/server/streaming/streamingtest"
)

// httpdCommand serves "hello from httpd" on port 8080 with busybox's httpd.
var httpdCommand = []string{"sh", "-c", "mkdir -p /www && echo hello from httpd > /www/index.html && exec httpd -f -p 8080 -h /www"}

// ttyScript says whether stdout is a terminal, its size once the resize
// sent at the start has arrived (or the last size seen), and writes to
// stderr.
const ttyScript = `test -t 1 && echo tty
for i in 1 2 3 4 5 6 7 8 9 10; do s=$(stty size <&2 2>/dev/null); [ "$s" = "40 100" ] && break; sleep 0.2; done
echo $s; echo to-stderr >&2`

func TestRealExecAndAttachURLsServeSessions(t *testing.T) {
	m, image, _ := realManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod := realPod("streams", image, func(p *v1.Pod) {
		p.Spec.Containers[0].Command = []string{"sh", "-c", "echo attached; exec cat"}
		p.Spec.Containers[0].Stdin = true
	})
	cleanup(t, m, pod)
	st := syncUntil(t, ctx, m, pod, nil, 50, 100*time.Millisecond, running("main"))
	id := st.FindContainerStatusByName("main").ID
	var d streamingtest.Dialer

	t.Run("exec with stdin, stdout, stderr and an exit code", func(t *testing.T) {
		u, err := m.GetExecURL(ctx, pod, runtime.ExecRequest{ContainerID: id, Stdin: true, Stdout: true, Stderr: true,
			Cmd: []string{"sh", "-c", "echo out; echo err >&2; read x; echo got $x; exit 3"}})
		require.NoError(t, err)
		var out, errOut bytes.Buffer
		err = d.Exec(ctx, u, streamingtest.Streams{Stdin: strings.NewReader("hello\n"), Stdout: &out, Stderr: &errOut})
		var exit *streamingtest.ExitError
		require.True(t, errors.As(err, &exit), "want an exit code, got %v", err)
		require.Equal(t, 3, exit.Code)
		require.Equal(t, "out\ngot hello\n", out.String())
		require.Equal(t, "err\n", errOut.String())
	})
	t.Run("exec that succeeds", func(t *testing.T) {
		u, err := m.GetExecURL(ctx, pod, runtime.ExecRequest{ContainerID: id, Stdout: true, Cmd: []string{"cat", "/etc/group"}})
		require.NoError(t, err)
		var out bytes.Buffer
		require.NoError(t, d.Exec(ctx, u, streamingtest.Streams{Stdout: &out}))
		require.Equal(t, "root:x:0:\n", out.String())
	})
	t.Run("exec with a TTY", func(t *testing.T) {
		u, err := m.GetExecURL(ctx, pod, runtime.ExecRequest{ContainerID: id, Stdout: true, Stderr: true, TTY: true,
			Cmd: []string{"sh", "-c", ttyScript}})
		require.NoError(t, err)
		var out bytes.Buffer
		require.NoError(t, d.Exec(ctx, u, streamingtest.Streams{Stdout: &out, TTY: true, Resize: []runtime.TermSize{{Width: 100, Height: 40}}}))
		// The terminal turns \n into \r\n and carries stderr too.
		require.Equal(t, "tty\r\n40 100\r\nto-stderr\r\n", out.String())
	})
	t.Run("attach", func(t *testing.T) {
		u, err := m.GetAttachURL(ctx, pod, runtime.ExecRequest{ContainerID: id, Stdin: true, Stdout: true})
		require.NoError(t, err)
		// cat echoes stdin; the session ends when the client goes.
		actx, acancel := context.WithCancel(ctx)
		defer acancel()
		pr, pw := io.Pipe()
		defer pw.Close()
		out := &testenv.Buffer{}
		done := make(chan error, 1)
		go func() { done <- d.Exec(actx, u, streamingtest.Streams{Stdin: pr, Stdout: out}) }()
		_, err = pw.Write([]byte("echo me\n"))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return strings.Contains(out.String(), "echo me\n") }, 30*time.Second, 20*time.Millisecond)
		acancel()
		pw.Close()
		require.ErrorIs(t, <-done, context.Canceled)
	})
	t.Run("exec in a container that is gone", func(t *testing.T) {
		_, err := m.GetExecURL(ctx, pod, runtime.ExecRequest{ContainerID: runtime.ContainerID{Type: id.Type, ID: "0123456789abcdef"}, Stdout: true, Cmd: []string{"ls"}})
		require.ErrorIs(t, err, runtime.ErrNotFound)
	})
}

func TestRealPortForwardURLReachesThePodsPort(t *testing.T) {
	m, image, _ := realManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod := realPod("portfwd", image, func(p *v1.Pod) { p.Spec.Containers[0].Command = httpdCommand })
	cleanup(t, m, pod)
	syncUntil(t, ctx, m, pod, nil, 50, 100*time.Millisecond, running("main"))
	var d streamingtest.Dialer

	// The sandbox is found by the pod's UID; httpd may need a moment.
	var resp []byte
	require.Eventually(t, func() bool {
		u, err := m.GetPortForwardURL(ctx, pod, "", []int32{8080})
		require.NoError(t, err)
		resp, err = d.RoundTrip(ctx, u, 8080, []byte("GET /index.html HTTP/1.0\r\n\r\n"))
		return err == nil && len(resp) > 0
	}, 30*time.Second, 200*time.Millisecond)
	require.Regexp(t, `^HTTP/1\.[01] 200 OK\r\n`, string(resp))
	require.True(t, strings.HasSuffix(string(resp), "\r\n\r\nhello from httpd\n"), string(resp))

	u, err := m.GetPortForwardURL(ctx, pod, "", []int32{8081})
	require.NoError(t, err)
	_, err = d.RoundTrip(ctx, u, 8081, []byte("GET / HTTP/1.0\r\n\r\n"))
	require.Error(t, err, "nothing listens on 8081")
}

// pods is the agent's view for the server: the pods it runs.
type pods []*v1.Pod

func (p pods) Pods() []*v1.Pod { return p }

// The kubelet API's path to a CRI runtime: the server finds the container
// or sandbox, asks the Manager for the runtime's URL and proxies the
// client's upgraded connection there, protocol and all.
func TestRealExecAndPortForwardThroughTheServerOnContainerd(t *testing.T) {
	m, image, _ := realManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod := realPod("proxied", image, func(p *v1.Pod) { p.Spec.Containers[0].Command = httpdCommand })
	cleanup(t, m, pod)
	syncUntil(t, ctx, m, pod, nil, 50, 100*time.Millisecond, running("main"))
	s, err := server.New(server.Config{Pods: pods{pod}, RunningPods: m, StreamURLs: m})
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	var d streamingtest.Dialer
	path := func(p string, q url.Values) *url.URL {
		u, err := url.Parse(ts.URL + p + "/" + pod.Namespace + "/" + pod.Name)
		require.NoError(t, err)
		u.RawQuery = q.Encode()
		return u
	}

	t.Run("exec with stdin, stdout, stderr and an exit code", func(t *testing.T) {
		q := url.Values{"command": {"sh", "-c", "echo out; echo err >&2; read x; echo got $x; exit 3"}, "input": {"1"}, "output": {"1"}, "error": {"1"}}
		var out, errOut bytes.Buffer
		err := d.Exec(ctx, path("/exec", q).JoinPath("main"), streamingtest.Streams{Stdin: strings.NewReader("hello\n"), Stdout: &out, Stderr: &errOut})
		var exit *streamingtest.ExitError
		require.True(t, errors.As(err, &exit), "want an exit code, got %v", err)
		require.Equal(t, 3, exit.Code)
		require.Equal(t, "out\ngot hello\n", out.String())
		require.Equal(t, "err\n", errOut.String())
	})
	t.Run("exec with the pod's UID in the path", func(t *testing.T) {
		q := url.Values{"command": {"cat", "/etc/passwd"}, "output": {"1"}}
		var out bytes.Buffer
		require.NoError(t, d.Exec(ctx, path("/exec", q).JoinPath(string(pod.UID), "main"), streamingtest.Streams{Stdout: &out}))
		require.Equal(t, "root:x:0:0:root:/:/bin/sh\n", out.String())
	})
	t.Run("port-forward to httpd", func(t *testing.T) {
		var resp []byte
		require.Eventually(t, func() bool {
			resp, err = d.RoundTrip(ctx, path("/portForward", nil), 8080, []byte("GET /index.html HTTP/1.0\r\n\r\n"))
			return err == nil && len(resp) > 0
		}, 30*time.Second, 200*time.Millisecond)
		require.Regexp(t, `^HTTP/1\.[01] 200 OK\r\n`, string(resp))
		require.True(t, strings.HasSuffix(string(resp), "\r\n\r\nhello from httpd\n"), string(resp))
	})
}
