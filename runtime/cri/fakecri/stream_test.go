package fakecri_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
	"github.com/nodekit/nodekit/server/streaming/streamingtest"
)

// running starts a container named name in a new sandbox and returns both IDs.
func (e *env) running(t *testing.T, name string) (sandbox, id string) {
	t.Helper()
	sandbox = e.sandbox(t, "pod-"+name, 0)
	id, err := e.container(sandbox, name, 0)
	require.NoError(t, err)
	_, err = e.rt.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	require.NoError(t, err)
	return sandbox, id
}

func (e *env) execURL(t *testing.T, req *runtimeapi.ExecRequest) *url.URL {
	t.Helper()
	resp, err := e.rt.Exec(e.ctx, req)
	require.NoError(t, err)
	u, err := url.Parse(resp.Url)
	require.NoError(t, err)
	return u
}

func TestExecSessionsRunProgrammedCommands(t *testing.T) {
	e := start(t)
	_, id := e.running(t, "app")
	ctx := t.Context()
	var d streamingtest.Dialer
	e.srv.SetExecResult("app", []string{"fail"}, fakecri.ExecResult{Stdout: "out\n", Stderr: "err\n", ExitCode: 3})
	e.srv.SetExecResult("app", []string{"cat"}, fakecri.ExecResult{EchoStdin: true, Stdout: "done\n"})

	t.Run("output and exit code", func(t *testing.T) {
		u := e.execURL(t, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"fail"}, Stdout: true, Stderr: true})
		require.True(t, strings.HasPrefix(u.String(), e.srv.StreamingURL()+"/exec/"), u.String())
		var out, errOut bytes.Buffer
		err := d.Exec(ctx, u, streamingtest.Streams{Stdout: &out, Stderr: &errOut})
		var exit *streamingtest.ExitError
		require.True(t, errors.As(err, &exit), "%v", err)
		require.Equal(t, 3, exit.Code)
		require.Equal(t, "out\n", out.String())
		require.Equal(t, "err\n", errOut.String())
	})
	t.Run("stdin", func(t *testing.T) {
		u := e.execURL(t, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"cat"}, Stdin: true, Stdout: true})
		var out bytes.Buffer
		require.NoError(t, d.Exec(ctx, u, streamingtest.Streams{Stdin: strings.NewReader("hello\n"), Stdout: &out}))
		require.Equal(t, "done\nhello\n", out.String())
	})
	t.Run("a TTY carries stderr", func(t *testing.T) {
		u := e.execURL(t, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"fail"}, Stdout: true, Tty: true})
		var out bytes.Buffer
		err := d.Exec(ctx, u, streamingtest.Streams{Stdout: &out, TTY: true, Resize: []runtime.TermSize{{Width: 80, Height: 24}}})
		var exit *streamingtest.ExitError
		require.True(t, errors.As(err, &exit), "%v", err)
		require.Equal(t, "out\nerr\n", out.String())
	})
	t.Run("over WebSocket", func(t *testing.T) {
		u := e.execURL(t, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"fail"}, Stdout: true, Stderr: true})
		res, err := streamingtest.WebSocketExec(ctx, u.String(), streamingtest.ExecOptions{Protocols: []string{"v5.channel.k8s.io"}, Stdout: true, Stderr: true})
		require.NoError(t, err)
		require.Equal(t, "out\n", res.Stdout)
		require.Equal(t, "err\n", res.Stderr)
		require.Contains(t, res.Error, `"reason":"NonZeroExitCode"`)
	})
	t.Run("an unprogrammed command exits 0 without output", func(t *testing.T) {
		u := e.execURL(t, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}, Stdout: true})
		var out bytes.Buffer
		require.NoError(t, d.Exec(ctx, u, streamingtest.Streams{Stdout: &out}))
		require.Empty(t, out.String())
	})
	t.Run("a URL serves one session", func(t *testing.T) {
		u := e.execURL(t, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}, Stdout: true})
		require.NoError(t, d.Exec(ctx, u, streamingtest.Streams{Stdout: io.Discard}))
		err := d.Exec(ctx, u, streamingtest.Streams{Stdout: io.Discard})
		require.ErrorContains(t, err, "unknown or expired exec URL")
	})
}

func TestExecAttachAndPortForwardRefuseWhatContainerdRefuses(t *testing.T) {
	e := start(t)
	sb, id := e.running(t, "app")
	created, err := e.container(sb, "created", 0)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"exec in a missing container", func() error {
			_, err := e.rt.Exec(e.ctx, &runtimeapi.ExecRequest{ContainerId: "gone", Cmd: []string{"ls"}, Stdout: true})
			return err
		}, codes.NotFound},
		{"exec in a container not running", func() error {
			_, err := e.rt.Exec(e.ctx, &runtimeapi.ExecRequest{ContainerId: created, Cmd: []string{"ls"}, Stdout: true})
			return err
		}, codes.FailedPrecondition},
		{"exec without a command", func() error {
			_, err := e.rt.Exec(e.ctx, &runtimeapi.ExecRequest{ContainerId: id, Stdout: true})
			return err
		}, codes.InvalidArgument},
		{"exec with a TTY and stderr", func() error {
			_, err := e.rt.Exec(e.ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"ls"}, Stdout: true, Stderr: true, Tty: true})
			return err
		}, codes.InvalidArgument},
		{"attach without streams", func() error {
			_, err := e.rt.Attach(e.ctx, &runtimeapi.AttachRequest{ContainerId: id})
			return err
		}, codes.InvalidArgument},
		{"attach to a missing container", func() error {
			_, err := e.rt.Attach(e.ctx, &runtimeapi.AttachRequest{ContainerId: "gone", Stdout: true})
			return err
		}, codes.NotFound},
		{"port-forward without a sandbox", func() error {
			_, err := e.rt.PortForward(e.ctx, &runtimeapi.PortForwardRequest{})
			return err
		}, codes.InvalidArgument},
		{"port-forward to a missing sandbox", func() error {
			_, err := e.rt.PortForward(e.ctx, &runtimeapi.PortForwardRequest{PodSandboxId: "gone"})
			return err
		}, codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, status.Code(tc.call()))
		})
	}
	t.Run("port-forward to a stopped sandbox", func(t *testing.T) {
		_, err := e.rt.StopPodSandbox(e.ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
		require.NoError(t, err)
		_, err = e.rt.PortForward(e.ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sb})
		require.Equal(t, codes.FailedPrecondition, status.Code(err))
	})
}

func TestAttachEchoesUntilTheContainerExits(t *testing.T) {
	e := start(t)
	_, id := e.running(t, "app")
	resp, err := e.rt.Attach(e.ctx, &runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true})
	require.NoError(t, err)
	u, err := url.Parse(resp.Url)
	require.NoError(t, err)
	pr, pw := io.Pipe()
	defer pw.Close()
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- streamingtest.Dialer{}.Exec(t.Context(), u, streamingtest.Streams{Stdin: pr, Stdout: out})
	}()
	_, err = pw.Write([]byte("ping\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return out.String() == "ping\n" }, 10*time.Second, 10*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("attach ended before the container exited: %v", err)
	default:
	}
	require.NoError(t, e.srv.Exit(id, 0))
	require.NoError(t, <-done)
}

func TestPortForwardReachesProgrammedPorts(t *testing.T) {
	e := start(t)
	sb, _ := e.running(t, "web")
	e.srv.SetPortHandler(80, func(_ context.Context, sandboxID string, conn io.ReadWriter) error {
		req, err := io.ReadAll(conn)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(conn, "HTTP/1.0 200 OK\r\n\r\n%s got %q", sandboxID, req)
		return err
	})
	forward := func(port int32) ([]byte, error) {
		resp, err := e.rt.PortForward(e.ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sb, Port: []int32{port}})
		require.NoError(t, err)
		u, err := url.Parse(resp.Url)
		require.NoError(t, err)
		return streamingtest.Dialer{}.RoundTrip(t.Context(), u, port, []byte("GET /"))
	}
	got, err := forward(80)
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.0 200 OK\r\n\r\n"+sb+` got "GET /"`, string(got))

	_, err = forward(81)
	require.ErrorContains(t, err, "connection refused")

	e.srv.SetPortHandler(80, nil)
	_, err = forward(80)
	require.ErrorContains(t, err, "connection refused")
}

func TestCloseEndsSessionsInFlight(t *testing.T) {
	srv, err := fakecri.NewServer(fakecri.Config{})
	require.NoError(t, err)
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	e := &env{srv: srv, rt: runtimeapi.NewRuntimeServiceClient(conn), ctx: context.Background()}
	_, id := e.running(t, "app")
	resp, err := e.rt.Attach(e.ctx, &runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true})
	require.NoError(t, err)
	u, err := url.Parse(resp.Url)
	require.NoError(t, err)
	pr, pw := io.Pipe()
	defer pw.Close()
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- streamingtest.Dialer{}.Exec(t.Context(), u, streamingtest.Streams{Stdin: pr, Stdout: out})
	}()
	_, err = pw.Write([]byte("ping\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return out.String() == "ping\n" }, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, srv.Close())
	select {
	case <-done: // the session was cut; goleak (TestMain) checks nothing of it is left
	case <-time.After(10 * time.Second):
		t.Fatal("the attach session outlived Close")
	}
}

func TestStreamURLsExpireAfterAMinute(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	srv, err := fakecri.NewServer(fakecri.Config{Clock: clk})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Close()) }()
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	e := &env{srv: srv, rt: runtimeapi.NewRuntimeServiceClient(conn), ctx: context.Background()}
	_, id := e.running(t, "app")
	fresh := e.execURL(t, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}, Stdout: true})
	stale := e.execURL(t, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}, Stdout: true})
	clk.SetTime(t0.Add(59 * time.Second))
	require.NoError(t, streamingtest.Dialer{}.Exec(t.Context(), fresh, streamingtest.Streams{Stdout: io.Discard}))
	clk.SetTime(t0.Add(61 * time.Second))
	err = streamingtest.Dialer{}.Exec(t.Context(), stale, streamingtest.Streams{Stdout: io.Discard})
	require.ErrorContains(t, err, "unknown or expired exec URL")
}
