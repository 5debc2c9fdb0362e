package fakecri

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server/streaming"
)

// tokenTTL is how long a URL of Exec, Attach or PortForward stays valid,
// as containerd's streaming server keeps its requests (one minute).
const tokenTTL = time.Minute

// streamRequest is a session asked for with Exec, Attach or PortForward,
// kept under its URL's token until the client comes (once).
type streamRequest struct {
	kind      string // "exec", "attach" or "portforward"
	exec      *runtimeapi.ExecRequest
	attach    *runtimeapi.AttachRequest
	portFwd   *runtimeapi.PortForwardRequest
	container string // the container's name, for the programmed results
	expires   time.Time
}

// streamServer is the fake's streaming server: an HTTP listener on loopback
// that serves the URLs Exec, Attach and PortForward return.
type streamServer struct {
	base     string // "http://127.0.0.1:port"
	http     *http.Server
	served   chan struct{}
	ctx      context.Context // ends sessions in flight at Close
	cancel   context.CancelFunc
	sessions sync.WaitGroup

	mu     sync.Mutex
	tokens map[string]*streamRequest
}

func (s *Server) startStreaming() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	st := &s.stream
	st.base = "http://" + l.Addr().String()
	st.tokens = map[string]*streamRequest{}
	st.served = make(chan struct{})
	st.ctx, st.cancel = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	for _, kind := range []string{"exec", "attach", "portforward"} {
		mux.HandleFunc("/"+kind+"/{token}", func(w http.ResponseWriter, r *http.Request) {
			s.serveStream(w, r, kind)
		})
	}
	st.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return st.ctx }}
	go func() {
		defer close(st.served)
		_ = st.http.Serve(l)
	}()
	return nil
}

// stopStreaming closes the listener and ends the sessions in flight
// (upgraded connections are no longer the http.Server's to close).
func (s *Server) stopStreaming() {
	st := &s.stream
	st.cancel()
	_ = st.http.Close()
	<-st.served
	st.sessions.Wait()
}

// StreamingURL returns the base URL of the fake's streaming server,
// "http://127.0.0.1:port"; the URLs Exec, Attach and PortForward return
// are under it.
func (s *Server) StreamingURL() string { return s.stream.base }

// newToken keeps req and returns the URL that serves it.
func (s *Server) newToken(req *streamRequest) (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	req.expires = s.clock.Now().Add(tokenTTL)
	st := &s.stream
	st.mu.Lock()
	defer st.mu.Unlock()
	for t, r := range st.tokens { // drop the expired ones
		if s.clock.Now().After(r.expires) {
			delete(st.tokens, t)
		}
	}
	st.tokens[tok] = req
	return st.base + "/" + req.kind + "/" + tok, nil
}

// takeToken returns the request of a token and forgets it: a URL serves
// one session, as containerd's.
func (s *Server) takeToken(kind, tok string) *streamRequest {
	st := &s.stream
	st.mu.Lock()
	defer st.mu.Unlock()
	req, ok := st.tokens[tok]
	if !ok || req.kind != kind {
		return nil
	}
	delete(st.tokens, tok)
	if s.clock.Now().After(req.expires) {
		return nil
	}
	return req
}

// runningContainer returns the name of a running container, or the
// status error containerd gives.
func (s *Server) runningContainer(id string) (string, error) {
	s.Runtime.Lock()
	defer s.Runtime.Unlock()
	c, ok := s.Runtime.Containers[id]
	switch {
	case !ok:
		return "", status.Errorf(codes.NotFound, "container %q not found", id)
	case c.State != runtimeapi.ContainerState_CONTAINER_RUNNING:
		return "", status.Errorf(codes.FailedPrecondition, "container %q is in %s state, not running", id, c.State)
	}
	return c.Metadata.GetName(), nil
}

// checkStreams validates streams as the CRI's streaming server does.
func checkStreams(stdin, stdout, stderr, tty bool) error {
	switch {
	case tty && stderr:
		return status.Error(codes.InvalidArgument, "tty and stderr cannot both be true")
	case !stdin && !stdout && !stderr:
		return status.Error(codes.InvalidArgument, "one of stdin, stdout, or stderr must be set")
	}
	return nil
}

// Exec returns the URL of an exec session of a programmed command
// (SetExecResult) in a running container.
func (r *runtimeServer) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if len(req.Cmd) == 0 {
		return nil, status.Error(codes.InvalidArgument, "cmd must not be empty")
	}
	if err := checkStreams(req.Stdin, req.Stdout, req.Stderr, req.Tty); err != nil {
		return nil, err
	}
	name, err := r.s.runningContainer(req.ContainerId)
	if err != nil {
		return nil, err
	}
	u, err := r.s.newToken(&streamRequest{kind: "exec", exec: req, container: name})
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &runtimeapi.ExecResponse{Url: u}, nil
}

// Attach returns the URL of an attach session to a running container.
func (r *runtimeServer) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if err := checkStreams(req.Stdin, req.Stdout, req.Stderr, req.Tty); err != nil {
		return nil, err
	}
	name, err := r.s.runningContainer(req.ContainerId)
	if err != nil {
		return nil, err
	}
	u, err := r.s.newToken(&streamRequest{kind: "attach", attach: req, container: name})
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &runtimeapi.AttachResponse{Url: u}, nil
}

// PortForward returns the URL of a port-forward session to a ready sandbox.
func (r *runtimeServer) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	s := r.s
	if req.PodSandboxId == "" {
		return nil, status.Error(codes.InvalidArgument, "missing required pod_sandbox_id")
	}
	s.Runtime.Lock()
	sb, ok := s.Runtime.Sandboxes[req.PodSandboxId]
	ready := ok && sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
	s.Runtime.Unlock()
	switch {
	case !ok:
		return nil, status.Errorf(codes.NotFound, "sandbox %q not found", req.PodSandboxId)
	case !ready:
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %q is not ready", req.PodSandboxId)
	}
	u, err := s.newToken(&streamRequest{kind: "portforward", portFwd: req})
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &runtimeapi.PortForwardResponse{Url: u}, nil
}

// serveStream serves one session URL with the kubelet's protocols
// (package streaming: SPDY or WebSocket, as the client asks).
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, kind string) {
	req := s.takeToken(kind, r.PathValue("token"))
	if req == nil {
		http.Error(w, fmt.Sprintf("fakecri: unknown or expired %s URL", kind), http.StatusNotFound)
		return
	}
	s.stream.sessions.Add(1)
	defer s.stream.sessions.Done()
	srv := streaming.New(streaming.Config{})
	switch kind {
	case "exec":
		e := req.exec
		opts := streaming.Options{Stdin: e.Stdin, Stdout: e.Stdout, Stderr: e.Stderr, TTY: e.Tty}
		srv.ServeExec(w, r, opts, func(ctx context.Context, streams runtime.AttachIO) error {
			return s.execSession(ctx, e.ContainerId, req.container, e.Cmd, streams)
		})
	case "attach":
		a := req.attach
		opts := streaming.Options{Stdin: a.Stdin, Stdout: a.Stdout, Stderr: a.Stderr, TTY: a.Tty}
		srv.ServeAttach(w, r, opts, func(ctx context.Context, streams runtime.AttachIO) error {
			return s.attachSession(ctx, a.ContainerId, streams)
		})
	case "portforward":
		sb := req.portFwd.PodSandboxId
		srv.ServePortForward(w, r, sb, sb, req.portFwd.Port, func(ctx context.Context, port int32, stream io.ReadWriteCloser) error {
			return s.forwardSession(ctx, sb, port, stream)
		})
	}
}

// exitError is a streamed command's non-zero exit, with the ExitStatus
// that package streaming reports as the exit code.
type exitError struct{ code int }

func (e exitError) Error() string   { return fmt.Sprintf("command exited with %d", e.code) }
func (e exitError) ExitStatus() int { return e.code }
func (e exitError) Exited() bool    { return true }

// execSession runs a programmed command (SetExecResult) on the streams:
// its Stdout, stdin echoed to stdout if EchoStdin, its Stderr (to stdout
// with a TTY) and its ExitCode, as runtime/fake's; Hang holds it until the
// client goes.
func (s *Server) execSession(ctx context.Context, id, name string, cmd []string, streams runtime.AttachIO) error {
	if _, err := s.runningContainer(id); err != nil {
		return err
	}
	s.mu.Lock()
	res, found := s.execs[execKey{name, strings.Join(cmd, "\x00")}]
	if !found {
		res = s.execs[execKey{name, ""}]
	}
	s.mu.Unlock()
	if res.Hang {
		<-ctx.Done()
		return ctx.Err()
	}
	stdout, stderr := streams.Stdout, streams.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if streams.TTY {
		stderr = stdout
	} else if stderr == nil {
		stderr = io.Discard
	}
	if _, err := io.WriteString(stdout, res.Stdout); err != nil {
		return err
	}
	if res.EchoStdin && streams.Stdin != nil {
		if _, err := io.Copy(stdout, streams.Stdin); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(stderr, res.Stderr); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return exitError{int(res.ExitCode)}
	}
	return nil
}

// attachSession echoes stdin to stdout (a container running cat) until
// the container exits or the client goes.
func (s *Server) attachSession(ctx context.Context, id string, streams runtime.AttachIO) error {
	exited, err := s.exitOf(id)
	if err != nil {
		return err
	}
	if streams.Stdin != nil && streams.Stdout != nil {
		// The copy ends when the streams close, after this returns; Close
		// waits for it.
		s.stream.sessions.Add(1)
		go func() {
			defer s.stream.sessions.Done()
			_, _ = io.Copy(streams.Stdout, streams.Stdin)
		}()
	}
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// exitOf returns a channel closed when the running container id exits.
func (s *Server) exitOf(id string) (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.runningContainer(id); err != nil {
		return nil, err
	}
	if s.exits == nil {
		s.exits = map[string]chan struct{}{}
	}
	ch, ok := s.exits[id]
	if !ok {
		ch = make(chan struct{})
		s.exits[id] = ch
	}
	return ch, nil
}

// PortHandler answers a connection to a port of a pod's sandbox, as a
// server listening there would, until it is done or ctx ends.
type PortHandler func(ctx context.Context, sandboxID string, conn io.ReadWriter) error

// SetPortHandler makes port of every sandbox answer with h (nil: the port
// refuses connections again, as every port does until set).
func (s *Server) SetPortHandler(port int32, h PortHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h == nil {
		delete(s.ports, port)
		return
	}
	if s.ports == nil {
		s.ports = map[int32]PortHandler{}
	}
	s.ports[port] = h
}

func (s *Server) forwardSession(ctx context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	s.mu.Lock()
	h := s.ports[port]
	s.mu.Unlock()
	if h == nil {
		// containerd's words when nothing listens in the pod.
		return fmt.Errorf("failed to connect to localhost:%d inside namespace %q: connection refused", port, sandboxID)
	}
	return h(ctx, sandboxID, stream)
}
