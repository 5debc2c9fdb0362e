package streaming_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server/streaming"
	"github.com/nodekit/nodekit/server/streaming/streamingtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// session is the scripted command named by the request's first command.
func session(cmd string) streaming.Session {
	return func(ctx context.Context, s runtime.AttachIO) error {
		switch cmd {
		case "hello":
			if s.Stdout != nil {
				fmt.Fprint(s.Stdout, "hello\n")
			}
			if s.Stderr != nil {
				fmt.Fprint(s.Stderr, "oops\n")
			}
			return nil
		case "exit3":
			fmt.Fprint(s.Stdout, "bye\n")
			return utilexec.CodeExitError{Err: errors.New("exit status 3"), Code: 3}
		case "fail":
			return errors.New("boom")
		case "cat": // until stdin closes
			_, err := io.Copy(s.Stdout, s.Stdin)
			return err
		case "tty": // prints the first terminal size
			if !s.TTY || s.Stderr != nil {
				return errors.New("not a tty session")
			}
			select {
			case size := <-s.Resize:
				fmt.Fprintf(s.Stdout, "%dx%d", size.Width, size.Height)
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		case "block": // until the session's context ends
			<-ctx.Done()
			return ctx.Err()
		}
		return fmt.Errorf("unknown command %q", cmd)
	}
}

type fixture struct {
	srv     *httptest.Server
	started chan struct{} // each exec session's start
	ended   chan error    // each session's end
	forward chan int32    // each forward's port
}

func newFixture(t *testing.T, cfg streaming.Config) *fixture {
	t.Helper()
	s := streaming.New(cfg)
	f := &fixture{started: make(chan struct{}, 1), ended: make(chan error, 10), forward: make(chan int32, 10)}
	mux := http.NewServeMux()
	mux.HandleFunc("/exec", func(w http.ResponseWriter, r *http.Request) {
		opts, err := streaming.NewOptions(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		run := session(r.URL.Query().Get("command"))
		s.ServeExec(w, r, opts, func(ctx context.Context, io runtime.AttachIO) error {
			select {
			case f.started <- struct{}{}:
			default: // nobody waits for it
			}
			err := run(ctx, io)
			f.ended <- err
			return err
		})
	})
	mux.HandleFunc("/attach", func(w http.ResponseWriter, r *http.Request) {
		opts, err := streaming.NewOptions(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.ServeAttach(w, r, opts, session(r.URL.Query().Get("command")))
	})
	mux.HandleFunc("/portForward", func(w http.ResponseWriter, r *http.Request) {
		ports, err := streaming.PortForwardPorts(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.ServePortForward(w, r, "web", "uid-web", ports, func(ctx context.Context, port int32, stream io.ReadWriteCloser) error {
			f.forward <- port
			if port != 80 {
				return errors.New("connection refused")
			}
			_, err := io.Copy(stream, stream) // an echo server
			return err
		})
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func status(t *testing.T, data string) metav1.Status {
	t.Helper()
	var st metav1.Status
	require.NoError(t, json.Unmarshal([]byte(data), &st), "error stream %q", data)
	return st
}

func exitCodeStatus(t *testing.T, data string) string {
	st := status(t, data)
	assert.Equal(t, metav1.StatusFailure, st.Status)
	assert.Equal(t, metav1.StatusReason("NonZeroExitCode"), st.Reason)
	require.NotNil(t, st.Details)
	require.Len(t, st.Details.Causes, 1)
	assert.Equal(t, metav1.CauseType("ExitCode"), st.Details.Causes[0].Type)
	return st.Details.Causes[0].Message
}

func TestSPDYExecByProtocol(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	out := streamingtest.ExecOptions{Stdout: true, Stderr: true}
	for _, tc := range []struct {
		name, protocol, cmd string
		stdout, stderr      string
		check               func(t *testing.T, errStream string)
	}{
		{"v1 success has no error stream", "channel.k8s.io", "hello", "hello\n", "oops\n", func(t *testing.T, e string) { assert.Empty(t, e) }},
		{"v1 exit code is lost, as the kubelet's v1", "channel.k8s.io", "exit3", "bye\n", "", func(t *testing.T, e string) { assert.Empty(t, e) }},
		{"v2 success writes nothing", "v2.channel.k8s.io", "hello", "hello\n", "oops\n", func(t *testing.T, e string) { assert.Empty(t, e) }},
		{"v2 exit is a message", "v2.channel.k8s.io", "exit3", "bye\n", "", func(t *testing.T, e string) {
			assert.Equal(t, "command terminated with non-zero exit code: exit status 3", e)
		}},
		{"v3 exit is a message", "v3.channel.k8s.io", "exit3", "bye\n", "", func(t *testing.T, e string) {
			assert.Equal(t, "command terminated with non-zero exit code: exit status 3", e)
		}},
		{"v4 success is a Success status", "v4.channel.k8s.io", "hello", "hello\n", "oops\n", func(t *testing.T, e string) {
			assert.Equal(t, metav1.StatusSuccess, status(t, e).Status)
		}},
		{"v4 exit code is in the status", "v4.channel.k8s.io", "exit3", "bye\n", "", func(t *testing.T, e string) {
			assert.Equal(t, "3", exitCodeStatus(t, e))
		}},
		{"v5 exit code is in the status", "v5.channel.k8s.io", "exit3", "bye\n", "", func(t *testing.T, e string) {
			assert.Equal(t, "3", exitCodeStatus(t, e))
		}},
		{"v4 runtime error is an internal error", "v4.channel.k8s.io", "fail", "", "", func(t *testing.T, e string) {
			st := status(t, e)
			assert.Equal(t, metav1.StatusReasonInternalError, st.Reason)
			assert.Equal(t, int32(500), st.Code)
			assert.Equal(t, "Internal error occurred: error executing command in container: boom", st.Message)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := out
			o.Protocols = []string{tc.protocol}
			res, err := streamingtest.SPDYExec(ctx(t), f.srv.URL+"/exec?"+o.Query(tc.cmd), o)
			require.NoError(t, err)
			<-f.ended
			assert.Equal(t, tc.protocol, res.Protocol)
			assert.Equal(t, tc.stdout, res.Stdout)
			assert.Equal(t, tc.stderr, res.Stderr)
			tc.check(t, res.Error)
		})
	}
}

func TestSPDYNegotiatesTheClientsFirstSupportedProtocol(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	o := streamingtest.ExecOptions{Stdout: true, Protocols: []string{"v9.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io"}}
	res, err := streamingtest.SPDYExec(ctx(t), f.srv.URL+"/exec?"+o.Query("hello"), o)
	require.NoError(t, err)
	<-f.ended
	assert.Equal(t, "v4.channel.k8s.io", res.Protocol)
	assert.Equal(t, "hello\n", res.Stdout)
}

func TestStdinReachesTheSessionAndItsCloseEndsIt(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	for _, tc := range []struct {
		name, protocol string
		ws             bool
	}{
		{"spdy v4", "v4.channel.k8s.io", false},
		{"spdy v5", "v5.channel.k8s.io", false},
		{"websocket v5 CLOSE signal", "v5.channel.k8s.io", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := streamingtest.ExecOptions{Protocols: []string{tc.protocol}, Stdin: strings.NewReader("typed\ntext\n"), Stdout: true}
			exec := streamingtest.SPDYExec
			if tc.ws {
				exec = streamingtest.WebSocketExec
			}
			res, err := exec(ctx(t), f.srv.URL+"/exec?"+o.Query("cat"), o)
			require.NoError(t, err)
			require.NoError(t, <-f.ended)
			assert.Equal(t, "typed\ntext\n", res.Stdout)
			assert.Equal(t, metav1.StatusSuccess, status(t, res.Error).Status)
		})
	}
}

func TestTTYSessionGetsResizesAndNoStderr(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	for _, tc := range []struct {
		name, protocol string
		ws             bool
	}{
		{"spdy v3", "v3.channel.k8s.io", false},
		{"spdy v4", "v4.channel.k8s.io", false},
		{"websocket v4", "v4.channel.k8s.io", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// stderr asked for with a tty is dropped, as the kubelet does.
			o := streamingtest.ExecOptions{Protocols: []string{tc.protocol}, Stdout: true, Stderr: true, TTY: true,
				Resize: []runtime.TermSize{{Width: 120, Height: 40}}}
			exec := streamingtest.SPDYExec
			if tc.ws {
				exec = streamingtest.WebSocketExec
			}
			o2 := o
			o2.Stderr = false // the client opens no stderr stream either
			res, err := exec(ctx(t), f.srv.URL+"/exec?"+o.Query("tty"), o2)
			require.NoError(t, err)
			require.NoError(t, <-f.ended)
			assert.Equal(t, "120x40", res.Stdout)
		})
	}
}

func TestWebSocketExecByProtocol(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	for _, tc := range []struct {
		name, protocol, cmd string
		stdout, stderr      string
		check               func(t *testing.T, errStream string)
	}{
		{"no protocol is channel.k8s.io", "", "exit3", "bye\n", "", func(t *testing.T, e string) {
			assert.Equal(t, "command terminated with non-zero exit code: exit status 3", e)
		}},
		{"channel.k8s.io", "channel.k8s.io", "hello", "hello\n", "oops\n", func(t *testing.T, e string) { assert.Empty(t, e) }},
		{"base64.channel.k8s.io", "base64.channel.k8s.io", "exit3", "bye\n", "", func(t *testing.T, e string) {
			assert.Equal(t, "command terminated with non-zero exit code: exit status 3", e)
		}},
		{"v4.channel.k8s.io", "v4.channel.k8s.io", "exit3", "bye\n", "", func(t *testing.T, e string) {
			assert.Equal(t, "3", exitCodeStatus(t, e))
		}},
		{"v4.base64.channel.k8s.io", "v4.base64.channel.k8s.io", "hello", "hello\n", "oops\n", func(t *testing.T, e string) {
			assert.Equal(t, metav1.StatusSuccess, status(t, e).Status)
		}},
		{"v5.channel.k8s.io", "v5.channel.k8s.io", "exit3", "bye\n", "", func(t *testing.T, e string) {
			assert.Equal(t, "3", exitCodeStatus(t, e))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := streamingtest.ExecOptions{Stdout: true, Stderr: true}
			if tc.protocol != "" {
				o.Protocols = []string{tc.protocol}
			}
			res, err := streamingtest.WebSocketExec(ctx(t), f.srv.URL+"/exec?"+o.Query(tc.cmd), o)
			require.NoError(t, err)
			<-f.ended
			assert.Equal(t, tc.protocol, res.Protocol)
			assert.Equal(t, tc.stdout, res.Stdout)
			assert.Equal(t, tc.stderr, res.Stderr)
			tc.check(t, res.Error)
		})
	}
}

func TestAttachErrorsAreInternalErrorsEvenWithAnExitCode(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	o := streamingtest.ExecOptions{Protocols: []string{"v4.channel.k8s.io"}, Stdout: true}
	res, err := streamingtest.SPDYExec(ctx(t), f.srv.URL+"/attach?"+o.Query("exit3"), o)
	require.NoError(t, err)
	st := status(t, res.Error)
	assert.Equal(t, metav1.StatusReasonInternalError, st.Reason)
	assert.Equal(t, "Internal error occurred: error attaching to container: exit status 3", st.Message)
}

func TestClientGoingAwayEndsTheSession(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	t.Run("spdy", func(t *testing.T) {
		conn, _, err := streamingtest.SPDYDial(ctx(t), http.MethodPost, f.srv.URL+"/exec?command=block&output=1", "v4.channel.k8s.io")
		require.NoError(t, err)
		for _, typ := range []string{"error", "stdout"} {
			_, err := conn.CreateStream(http.Header{"Streamtype": {typ}})
			require.NoError(t, err)
		}
		<-f.started
		require.NoError(t, conn.Close())
		assert.ErrorIs(t, <-f.ended, context.Canceled)
	})
	t.Run("websocket", func(t *testing.T) {
		c, err := streamingtest.WebSocketDial(ctx(t), f.srv.URL+"/exec?command=block&output=1", "v4.channel.k8s.io")
		require.NoError(t, err)
		_, _, err = c.Recv() // the session is up
		require.NoError(t, err)
		require.NoError(t, c.Close())
		assert.ErrorIs(t, <-f.ended, context.Canceled)
	})
}

func TestStreamsNotCreatedInTimeCloseTheConnection(t *testing.T) {
	f := newFixture(t, streaming.Config{CreationTimeout: 100 * time.Millisecond})
	conn, _, err := streamingtest.SPDYDial(ctx(t), http.MethodPost, f.srv.URL+"/exec?command=hello&output=1", "v4.channel.k8s.io")
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.CreateStream(http.Header{"Streamtype": {"error"}}) // no stdout stream
	require.NoError(t, err)
	select {
	case <-conn.CloseChan():
	case <-ctx(t).Done():
		t.Fatal("the server kept a connection whose streams never came")
	}
	select {
	case err := <-f.ended:
		t.Fatalf("the session ran: %v", err)
	default:
	}
}

func TestBadRemotecommandRequests(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	for _, tc := range []struct {
		name    string
		query   string
		headers http.Header
		code    int
		body    string
	}{
		{"no streams", "command=hello", http.Header{"X-Stream-Protocol-Version": {"v4.channel.k8s.io"}}, http.StatusBadRequest, "you must specify at least 1 of stdin, stdout, stderr"},
		{"tty stderr alone is no stream", "command=hello&error=1&tty=1", http.Header{"X-Stream-Protocol-Version": {"v4.channel.k8s.io"}}, http.StatusBadRequest, "you must specify at least 1 of stdin, stdout, stderr"},
		{"no protocol", "command=hello&output=1", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"SPDY/3.1"}}, http.StatusBadRequest, "unable to upgrade: header X-Stream-Protocol-Version does not exist"},
		{"unsupported protocol", "command=hello&output=1", http.Header{"X-Stream-Protocol-Version": {"v9.channel.k8s.io"}}, http.StatusForbidden, "unable to negotiate protocol"},
		{"not an upgrade", "command=hello&output=1", http.Header{"X-Stream-Protocol-Version": {"v4.channel.k8s.io"}}, http.StatusBadRequest, "unable to upgrade: missing upgrade headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, f.srv.URL+"/exec?"+tc.query, nil)
			require.NoError(t, err)
			req.Header = tc.headers
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, tc.code, resp.StatusCode)
			assert.Contains(t, string(body), tc.body)
		})
	}
}

func TestSPDYPortForward(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	pf, err := streamingtest.DialSPDYPortForward(ctx(t), f.srv.URL+"/portForward")
	require.NoError(t, err)
	defer pf.Close()

	t.Run("data both ways", func(t *testing.T) {
		for i := range 2 { // two connections over one upgrade
			data, errStream, err := pf.Forward(80)
			require.NoError(t, err)
			assert.Equal(t, int32(80), <-f.forward)
			msg := fmt.Sprintf("ping %d", i)
			_, err = data.Write([]byte(msg))
			require.NoError(t, err)
			require.NoError(t, data.Close()) // half-close: the echo ends
			got, _ := io.ReadAll(data)
			assert.Equal(t, msg, string(got))
			errs, _ := io.ReadAll(errStream)
			assert.Empty(t, string(errs))
		}
	})
	t.Run("a port nobody listens on", func(t *testing.T) {
		data, errStream, err := pf.Forward(81)
		require.NoError(t, err)
		assert.Equal(t, int32(81), <-f.forward)
		errs, _ := io.ReadAll(errStream)
		assert.Equal(t, "error forwarding port 81 to pod web, uid uid-web: connection refused", string(errs))
		_ = data.Reset()
	})
}

func TestSPDYPortForwardRefusesStreamsWithoutAPort(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	pf, err := streamingtest.DialSPDYPortForward(ctx(t), f.srv.URL+"/portForward")
	require.NoError(t, err)
	defer pf.Close()
	st, err := pf.Conn.CreateStream(http.Header{"Streamtype": {"data"}, "Requestid": {"0"}})
	if err == nil { // the reset may come after the reply
		_, err = st.Read(make([]byte, 1))
	}
	assert.ErrorContains(t, err, "reset")
	select {
	case port := <-f.forward:
		t.Fatalf("forwarded port %d", port)
	default:
	}
}

func TestWebSocketPortForward(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	for _, protocol := range []string{"v4.channel.k8s.io", "v4.base64.channel.k8s.io"} {
		t.Run(protocol, func(t *testing.T) {
			c, err := streamingtest.WebSocketDial(ctx(t), f.srv.URL+"/portForward?port=80,81", protocol)
			require.NoError(t, err)
			defer c.Close()
			// each channel starts with its port, little-endian
			prefixes := map[byte]uint16{}
			for range 4 {
				ch, data, err := c.Recv()
				require.NoError(t, err)
				require.Len(t, data, 2)
				prefixes[ch] = binary.LittleEndian.Uint16(data)
			}
			assert.Equal(t, map[byte]uint16{0: 80, 1: 80, 2: 81, 3: 81}, prefixes)
			require.NoError(t, c.Send(0, []byte("ping")))
			got := map[byte]string{}
			for got[0] != "ping" || got[3] == "" {
				ch, data, err := c.Recv()
				require.NoError(t, err)
				got[ch] += string(data)
			}
			assert.Equal(t, "error forwarding port 81 to pod web, uid uid-web: connection refused", got[3])
			<-f.forward
			<-f.forward
		})
	}
}

func TestWebSocketPortForwardNeedsPorts(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	for _, q := range []string{"", "?port=", "?port=0", "?port=http"} {
		_, err := streamingtest.WebSocketDial(ctx(t), f.srv.URL+"/portForward"+q, "v4.channel.k8s.io")
		assert.Error(t, err, q)
	}
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	f := newFixture(t, streaming.Config{IdleTimeout: 100 * time.Millisecond})
	t.Run("spdy", func(t *testing.T) {
		conn, _, err := streamingtest.SPDYDial(ctx(t), http.MethodPost, f.srv.URL+"/exec?command=block&output=1", "v4.channel.k8s.io")
		require.NoError(t, err)
		defer conn.Close()
		for _, typ := range []string{"error", "stdout"} {
			_, err := conn.CreateStream(http.Header{"Streamtype": {typ}})
			require.NoError(t, err)
		}
		assert.ErrorIs(t, <-f.ended, context.Canceled)
		<-conn.CloseChan()
	})
	t.Run("websocket", func(t *testing.T) {
		c, err := streamingtest.WebSocketDial(ctx(t), f.srv.URL+"/exec?command=block&output=1", "v4.channel.k8s.io")
		require.NoError(t, err)
		defer c.Close()
		assert.ErrorIs(t, <-f.ended, context.Canceled)
	})
}

func BenchmarkSPDYExec(b *testing.B) {
	s := streaming.New(streaming.Config{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeExec(w, r, streaming.Options{Stdout: true}, session("hello"))
	}))
	defer srv.Close()
	o := streamingtest.ExecOptions{Protocols: []string{"v4.channel.k8s.io"}, Stdout: true}
	b.ReportAllocs()
	for b.Loop() {
		res, err := streamingtest.SPDYExec(b.Context(), srv.URL, o)
		if err != nil || res.Stdout != "hello\n" {
			b.Fatalf("%q %v", res.Stdout, err)
		}
	}
}

func TestWebSocketUnsupportedProtocolIsRefused(t *testing.T) {
	f := newFixture(t, streaming.Config{})
	_, err := streamingtest.WebSocketDial(ctx(t), f.srv.URL+"/exec?command=hello&output=1", "v9.channel.k8s.io")
	assert.Error(t, err)
	_, err = streamingtest.WebSocketDial(ctx(t), f.srv.URL+"/portForward?port=80", "v5.channel.k8s.io")
	assert.Error(t, err)
	select {
	case err := <-f.ended:
		t.Fatalf("a session ran: %v", err)
	case port := <-f.forward:
		t.Fatalf("port %d was forwarded", port)
	default:
	}
}
