package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/server/streaming"
	"github.com/nodekit/nodekit/server/streaming/streamingtest"
)

// streamer is an in-process runtime: exec "echo ..." prints its arguments,
// "false" exits 1; attach prints whom it attached to; port 80 echoes.
type streamer struct {
	mu    sync.Mutex
	calls []string
}

func (s *streamer) record(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, fmt.Sprintf(format, args...))
}

func (s *streamer) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func (s *streamer) Exec(_ context.Context, pod *v1.Pod, id runtime.ContainerID, cmd []string, io runtime.AttachIO) error {
	s.record("exec %s %s %v", pod.Name, id.ID, cmd)
	switch cmd[0] {
	case "echo":
		_, err := fmt.Fprint(io.Stdout, strings.Join(cmd[1:], " "))
		return err
	case "false":
		return utilexec.CodeExitError{Err: errors.New("exit status 1"), Code: 1}
	}
	return errors.New("no such command")
}

func (s *streamer) Attach(_ context.Context, pod *v1.Pod, id runtime.ContainerID, io runtime.AttachIO) error {
	s.record("attach %s %s tty=%v", pod.Name, id.ID, io.TTY)
	_, err := fmt.Fprintf(io.Stdout, "attached to %s", id.ID)
	return err
}

func (s *streamer) PortForward(_ context.Context, pod *v1.Pod, port int32, stream io.ReadWriteCloser) error {
	s.record("forward %s %d", pod.Name, port)
	if port != 80 {
		return errors.New("connection refused")
	}
	_, err := io.Copy(stream, stream)
	return err
}

// runner answers ExecSync: "echo ..." prints its arguments on stdout and
// "warn" on stderr; "false" exits 2.
type runner struct{}

func (runner) ExecSync(_ context.Context, id runtime.ContainerID, cmd []string, _ time.Duration) ([]byte, []byte, int, error) {
	switch cmd[0] {
	case "echo":
		return []byte(strings.Join(cmd[1:], " ") + "\n"), []byte("warn\n"), 0, nil
	case "false":
		return nil, []byte("failed\n"), 2, nil
	case "true":
		return nil, nil, 0, nil
	}
	return nil, nil, 0, fmt.Errorf("exec in %s: %w", id, runtime.ErrNotFound)
}

func inProcess(st *streamer) func(*server.Config) {
	return func(c *server.Config) {
		c.Streaming, c.PortForward, c.Exec = st, st, runner{}
	}
}

func statusOf(t *testing.T, data string) metav1.Status {
	t.Helper()
	var st metav1.Status
	require.NoError(t, json.Unmarshal([]byte(data), &st), "error stream %q", data)
	return st
}

func TestExecAndAttachInProcess(t *testing.T) {
	st := &streamer{}
	f := newFixture(t, inProcess(st))
	out := streamingtest.ExecOptions{Stdout: true}
	for _, tc := range []struct {
		name, path string
		ws         bool
		opts       streamingtest.ExecOptions
		stdout     string
		call       string
		exitCode   string // "" for success
	}{
		{"exec over SPDY", "/exec/default/web/app?" + out.Query("echo", "hi", "there"), false, out, "hi there", "exec web c2 [echo hi there]", ""},
		{"exec with the pod's UID", "/exec/default/web/uid-web/app?" + out.Query("echo", "hi"), false, out, "hi", "exec web c2 [echo hi]", ""},
		{"exec over WebSocket", "/exec/default/web/app?" + out.Query("echo", "hi"), true, out, "hi", "exec web c2 [echo hi]", ""},
		{"a non-zero exit reaches the client", "/exec/default/web/app?" + out.Query("false"), false, out, "", "exec web c2 [false]", "1"},
		{"attach", "/attach/default/web/app?" + out.Query(), false, out, "attached to c2", "attach web c2 tty=false", ""},
		{"attach with the pod's UID over WebSocket", "/attach/default/web/uid-web/app?" + out.Query(), true, out, "attached to c2", "attach web c2 tty=false", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Protocols = []string{"v5.channel.k8s.io"}
			exec := streamingtest.SPDYExec
			if tc.ws {
				exec = streamingtest.WebSocketExec
			}
			res, err := exec(t.Context(), f.srv.URL+tc.path, o)
			require.NoError(t, err)
			assert.Equal(t, tc.stdout, res.Stdout)
			status := statusOf(t, res.Error)
			if tc.exitCode == "" {
				assert.Equal(t, metav1.StatusSuccess, status.Status)
			} else {
				assert.Equal(t, metav1.StatusReason("NonZeroExitCode"), status.Reason)
				require.NotNil(t, status.Details)
				assert.Equal(t, tc.exitCode, status.Details.Causes[0].Message)
			}
			calls := st.Calls()
			require.NotEmpty(t, calls)
			assert.Equal(t, tc.call, calls[len(calls)-1])
		})
	}
}

func TestPortForwardInProcess(t *testing.T) {
	st := &streamer{}
	f := newFixture(t, inProcess(st))
	for _, path := range []string{"/portForward/default/web", "/portForward/default/web/uid-web"} {
		t.Run(path, func(t *testing.T) {
			pf, err := streamingtest.DialSPDYPortForward(t.Context(), f.srv.URL+path)
			require.NoError(t, err)
			defer pf.Close()
			data, errStream, err := pf.Forward(80)
			require.NoError(t, err)
			_, err = data.Write([]byte("ping"))
			require.NoError(t, err)
			require.NoError(t, data.Close())
			got, _ := io.ReadAll(data)
			assert.Equal(t, "ping", string(got))

			_, errStream, err = pf.Forward(81)
			require.NoError(t, err)
			msg, _ := io.ReadAll(errStream)
			assert.Equal(t, "error forwarding port 81 to pod web, uid uid-web: connection refused", string(msg))
		})
	}
	t.Run("websocket", func(t *testing.T) {
		c, err := streamingtest.WebSocketDial(t.Context(), f.srv.URL+"/portForward/default/web?port=80", "v4.channel.k8s.io")
		require.NoError(t, err)
		defer c.Close()
		for range 2 { // the port prefixes
			_, _, err := c.Recv()
			require.NoError(t, err)
		}
		require.NoError(t, c.Send(0, []byte("ping")))
		ch, data, err := c.Recv()
		require.NoError(t, err)
		assert.Equal(t, byte(0), ch)
		assert.Equal(t, "ping", string(data))
	})
}

func TestRun(t *testing.T) {
	f := newFixture(t, inProcess(&streamer{}))
	for _, tc := range []struct {
		name, path  string
		code        int
		body, ctype string
	}{
		{"stdout then stderr", "/run/default/web/app?cmd=" + url.QueryEscape("echo hi there"), http.StatusOK, "hi there\nwarn\n", "application/json"},
		{"with the pod's UID", "/run/default/web/uid-web/app?cmd=echo+hi", http.StatusOK, "hi\nwarn\n", "application/json"},
		{"no output is an empty 200", "/run/default/web/app?cmd=true", http.StatusOK, "", ""},
		{"a non-zero exit is a 500 with stderr", "/run/default/web/app?cmd=false", http.StatusInternalServerError, "command 'false' exited with 2: failed\n\n", ""},
		{"a runtime error is a 500", "/run/default/web/app?cmd=nope", http.StatusInternalServerError, "exec in fake://c2: runtime: not found\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := f.srv.Client().Post(f.srv.URL+tc.path, "", nil)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, tc.code, resp.StatusCode)
			assert.Equal(t, tc.body, string(body))
			if tc.ctype != "" {
				assert.Equal(t, tc.ctype, resp.Header.Get("Content-Type"))
			}
		})
	}
}

// The kubelet's answers to requests that never reach a session.
func TestStreamingRequestErrors(t *testing.T) {
	st := &streamer{}
	f := newFixture(t, inProcess(st))
	wsHeaders := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"x"}}
	for _, tc := range []struct {
		name, method, path string
		headers            http.Header
		code               int
		body               string
	}{
		{"exec without streams", "POST", "/exec/default/web/app?command=ls", nil, http.StatusBadRequest, "you must specify at least 1 of stdin, stdout, stderr\n"},
		{"exec without a command", "POST", "/exec/default/web/app?output=1", nil, http.StatusBadRequest, "missing required \"command\" parameter\n"},
		{"exec in an unknown pod", "POST", "/exec/default/nope/app?command=ls&output=1", nil, http.StatusNotFound, "pod does not exist\n"},
		{"exec in a container that does not run", "POST", "/exec/default/web/waiting?command=ls&output=1", nil, http.StatusInternalServerError, "container not found (\"waiting\")\n"},
		{"exec with another UID", "POST", "/exec/default/web/other-uid/app?command=ls&output=1", nil, http.StatusInternalServerError, "container not found (\"app\")\n"},
		{"exec with PUT", "PUT", "/exec/default/web/app?command=ls&output=1", nil, http.StatusMethodNotAllowed, "Method Not Allowed\n"},
		{"attach without streams", "GET", "/attach/default/web/app", nil, http.StatusBadRequest, "you must specify at least 1 of stdin, stdout, stderr\n"},
		{"attach to an unknown pod", "GET", "/attach/default/nope/app?output=1", nil, http.StatusNotFound, "pod does not exist\n"},
		{"attach to a container that does not run", "GET", "/attach/default/web/nope?output=1", nil, http.StatusInternalServerError, "container nope not found in pod web_default\n"},
		{"port-forward to an unknown pod", "POST", "/portForward/default/nope", nil, http.StatusNotFound, "pod does not exist\n"},
		{"port-forward with another UID", "POST", "/portForward/default/web/other-uid", nil, http.StatusNotFound, "pod not found\n"},
		{"websocket port-forward without ports", "GET", "/portForward/default/web", wsHeaders, http.StatusBadRequest, "query parameter \"port\" is required\n"},
		{"port-forward without an upgrade", "POST", "/portForward/default/web", http.Header{"X-Stream-Protocol-Version": {"portforward.k8s.io"}}, http.StatusBadRequest, "unable to upgrade: missing upgrade headers in request"},
		{"run in an unknown pod", "POST", "/run/default/nope/app?cmd=ls", nil, http.StatusNotFound, "pod does not exist\n"},
		{"run in a container that does not run", "POST", "/run/default/web/waiting?cmd=ls", nil, http.StatusInternalServerError, "container not found (\"waiting\")\n"},
		{"run with GET", "GET", "/run/default/web/app?cmd=ls", nil, http.StatusMethodNotAllowed, "Method Not Allowed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, f.srv.URL+tc.path, nil)
			require.NoError(t, err)
			if tc.headers != nil {
				req.Header = tc.headers
			}
			resp, err := f.srv.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, tc.code, resp.StatusCode)
			if strings.HasSuffix(tc.body, "\n") {
				assert.Equal(t, tc.body, string(body))
			} else {
				assert.Contains(t, string(body), tc.body)
			}
		})
	}
	assert.Empty(t, st.Calls(), "no request reached the runtime")
}

func TestStreamingEndpointsAreNotReadOnly(t *testing.T) {
	for name, mod := range map[string]func(*server.Config){
		"read-only":    func(c *server.Config) { inProcess(&streamer{})(c); c.ReadOnly = true },
		"not provided": nil,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, mod)
			for _, path := range []string{"/exec/default/web/app?command=ls&output=1", "/attach/default/web/app?output=1", "/portForward/default/web", "/run/default/web/app?cmd=ls"} {
				resp, err := f.srv.Client().Post(f.srv.URL+path, "", nil)
				require.NoError(t, err)
				_ = resp.Body.Close()
				assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
			}
		})
	}
}

func TestStreamingNeedsRunningPods(t *testing.T) {
	_, err := server.New(server.Config{Pods: podList{}, Streaming: &streamer{}})
	assert.ErrorIs(t, err, server.ErrInvalidConfig)
}

// urlStreamer is a runtime with a streaming server of its own, as a CRI
// runtime: each URL names the request, and the server runs it.
type urlStreamer struct {
	base string
	mu   sync.Mutex
	reqs []string
	err  error
}

func (u *urlStreamer) url(format string, args ...any) (*url.URL, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err != nil {
		return nil, u.err
	}
	req := fmt.Sprintf(format, args...)
	u.reqs = append(u.reqs, req)
	return url.Parse(fmt.Sprintf("%s/%d", u.base, len(u.reqs)-1))
}

func (u *urlStreamer) request(i string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var n int
	_, _ = fmt.Sscan(i, &n)
	return u.reqs[n]
}

func (u *urlStreamer) GetExecURL(_ context.Context, pod *v1.Pod, r runtime.ExecRequest) (*url.URL, error) {
	return u.url("exec %s %s %v in=%v out=%v err=%v tty=%v", pod.Name, r.ContainerID.ID, r.Cmd, r.Stdin, r.Stdout, r.Stderr, r.TTY)
}

func (u *urlStreamer) GetAttachURL(_ context.Context, pod *v1.Pod, r runtime.ExecRequest) (*url.URL, error) {
	return u.url("attach %s %s in=%v out=%v err=%v tty=%v", pod.Name, r.ContainerID.ID, r.Stdin, r.Stdout, r.Stderr, r.TTY)
}

func (u *urlStreamer) GetPortForwardURL(_ context.Context, pod *v1.Pod, sandboxID string, ports []int32) (*url.URL, error) {
	return u.url("portforward %s %s %v", pod.Name, sandboxID, ports)
}

func TestStreamsOfARuntimesOwnServerAreProxied(t *testing.T) {
	// the runtime's streaming server: a session prints the request its URL
	// names; a forwarded port echoes.
	us := &urlStreamer{}
	backend := streaming.New(streaming.Config{})
	mux := http.NewServeMux()
	mux.HandleFunc("/{id}", func(w http.ResponseWriter, r *http.Request) {
		req := us.request(r.PathValue("id"))
		if strings.HasPrefix(req, "portforward") {
			backend.ServePortForward(w, r, "web", "uid-web", nil, func(_ context.Context, _ int32, s io.ReadWriteCloser) error {
				_, err := io.Copy(s, s)
				return err
			})
			return
		}
		// as a CRI streaming server, the streams come with the URL (its
		// token), not the query
		backend.ServeExec(w, r, streaming.Options{Stdout: true, Stderr: true}, func(_ context.Context, io runtime.AttachIO) error {
			_, err := fmt.Fprint(io.Stdout, req)
			return err
		})
	})
	rs := httptest.NewServer(mux)
	defer rs.Close()
	us.base = rs.URL

	f := newFixture(t, func(c *server.Config) { c.StreamURLs = us })
	o := streamingtest.ExecOptions{Protocols: []string{"v4.channel.k8s.io"}, Stdout: true, Stderr: true}
	t.Run("exec", func(t *testing.T) {
		res, err := streamingtest.SPDYExec(t.Context(), f.srv.URL+"/exec/default/web/app?"+o.Query("ls", "-l"), o)
		require.NoError(t, err)
		assert.Equal(t, "exec web c2 [ls -l] in=false out=true err=true tty=false", res.Stdout)
		assert.Equal(t, metav1.StatusSuccess, statusOf(t, res.Error).Status)
	})
	t.Run("attach gets the spec's tty", func(t *testing.T) {
		res, err := streamingtest.SPDYExec(t.Context(), f.srv.URL+"/attach/default/web/app?"+o.Query(), o)
		require.NoError(t, err)
		assert.Equal(t, "attach web c2 in=false out=true err=true tty=false", res.Stdout)
	})
	t.Run("port-forward to the ready sandbox", func(t *testing.T) {
		pf, err := streamingtest.DialSPDYPortForward(t.Context(), f.srv.URL+"/portForward/default/web")
		require.NoError(t, err)
		defer pf.Close()
		data, _, err := pf.Forward(8080)
		require.NoError(t, err)
		_, err = data.Write([]byte("ping"))
		require.NoError(t, err)
		require.NoError(t, data.Close())
		got, _ := io.ReadAll(data)
		assert.Equal(t, "ping", string(got))
		assert.Equal(t, "portforward web sandbox1 []", us.request("2"))
	})
	t.Run("a request without an upgrade is refused", func(t *testing.T) {
		resp, err := f.srv.Client().Post(f.srv.URL+"/exec/default/web/app?command=ls&output=1", "", nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		assert.Contains(t, string(body), "Upgrade request required")
	})
	t.Run("the runtime's not found is a 404", func(t *testing.T) {
		us.mu.Lock()
		us.err = fmt.Errorf("container c2: %w", runtime.ErrNotFound)
		us.mu.Unlock()
		resp, err := f.srv.Client().Post(f.srv.URL+"/exec/default/web/app?command=ls&output=1", "", nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
		assert.Equal(t, "container c2: runtime: not found\n", string(body))
	})
}

// As the kubelet's: exec, attach, port-forward and run are nodes/proxy,
// create for POST and get for GET.
func TestStreamingEndpointsAreAuthorizedAsNodesProxy(t *testing.T) {
	a := &server.Auth{NodeName: "n1"}
	u := &server.User{Name: "u"}
	for _, tc := range []struct{ method, path, verb string }{
		{"POST", "/exec/default/web/app", "create"},
		{"GET", "/exec/default/web/uid-web/app", "get"},
		{"POST", "/attach/default/web/app", "create"},
		{"GET", "/portForward/default/web", "get"},
		{"POST", "/portForward/default/web/uid-web", "create"},
		{"POST", "/run/default/web/app", "create"},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		assert.Equal(t, []server.Attributes{{User: u, Verb: tc.verb, Resource: "nodes", Subresource: "proxy", Name: "n1", Path: tc.path}},
			a.Attributes(u, r), tc.method+" "+tc.path)
	}
	f := newFixture(t, func(c *server.Config) {
		inProcess(&streamer{})(c)
		c.Auth = &server.Auth{Authenticator: tokenAuth{"t": "someone"}, Authorizer: grants{"pods": true, "log": true}, NodeName: "n1"}
	})
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/exec/default/web/app?command=ls&output=1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer t")
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
}
