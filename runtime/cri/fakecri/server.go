package fakecri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/clock"
)

// Config configures a Server. The zero value works.
type Config struct {
	// Dir is where the socket is created. Default: a new temp dir, removed
	// by Close. Keep it short: unix socket paths are limited to 107 bytes.
	Dir string
	// Clock stamps created, started and finished times. Default: the real clock.
	Clock clock.PassiveClock
}

// Behavior programs what a container does, chosen by container name.
type Behavior struct {
	// ExitOnStart makes the container exit with ExitCode as soon as it has
	// started (a crashing container when ExitCode is not 0).
	ExitOnStart bool
	ExitCode    int32
	// Log, if not empty, is written to the container's log file when it
	// starts, one CRI log line per line of Log.
	Log string
}

// Server is a fake CRI runtime and image service on a unix socket. It is
// safe for concurrent use.
type Server struct {
	// Runtime and Images hold the state. Seed or inspect them with their
	// own methods (they lock themselves); prefer the Server's methods while
	// calls are in flight.
	Runtime *critest.FakeRuntimeService
	Images  *critest.FakeImageService

	clock    clock.PassiveClock
	dir      string
	ownDir   bool
	endpoint string
	grpc     *grpc.Server
	served   chan struct{}

	// mu serializes the state changes the server makes on top of the
	// upstream fakes, so check-then-act is atomic.
	mu sync.Mutex
	// sandboxConfigs keeps each sandbox's config (for the log directory).
	sandboxConfigs map[string]*runtimeapi.PodSandboxConfig
	behaviors      map[string]Behavior
	execs          map[execKey]ExecResult
	stopTimeouts   map[string]int64
	events         subscribers
	stream         streamServer
	// exits are closed when their container exits (attach sessions).
	exits map[string]chan struct{}
	ports map[int32]PortHandler

	pullsMu sync.Mutex
	pulls   []Pull

	injMu     sync.Mutex
	calls     map[string]int
	failNext  map[string][]error
	errs      map[string]error
	latencies map[string]time.Duration
	rewrites  map[string]func(resp any) any
}

// NewServer starts a server. Close it to stop it.
func NewServer(c Config) (*Server, error) {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	s := &Server{
		Runtime:        critest.NewFakeRuntimeService(),
		Images:         critest.NewFakeImageService(),
		clock:          c.Clock,
		dir:            c.Dir,
		served:         make(chan struct{}),
		sandboxConfigs: map[string]*runtimeapi.PodSandboxConfig{},
		behaviors:      map[string]Behavior{},
		stopTimeouts:   map[string]int64{},
		calls:          map[string]int{},
		failNext:       map[string][]error{},
		errs:           map[string]error{},
		latencies:      map[string]time.Duration{},
		rewrites:       map[string]func(any) any{},
	}
	s.Runtime.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}
	if s.dir == "" {
		d, err := os.MkdirTemp("", "fakecri")
		if err != nil {
			return nil, fmt.Errorf("fakecri: %w", err)
		}
		s.dir, s.ownDir = d, true
	}
	sock := filepath.Join(s.dir, "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		if s.ownDir {
			os.RemoveAll(s.dir)
		}
		return nil, fmt.Errorf("fakecri: %w", err)
	}
	if err := s.startStreaming(); err != nil {
		l.Close()
		if s.ownDir {
			os.RemoveAll(s.dir)
		}
		return nil, fmt.Errorf("fakecri: streaming server: %w", err)
	}
	s.endpoint = "unix://" + sock
	s.grpc = grpc.NewServer(grpc.UnaryInterceptor(s.intercept), grpc.StreamInterceptor(s.interceptStream))
	runtimeapi.RegisterRuntimeServiceServer(s.grpc, &runtimeServer{s: s})
	runtimeapi.RegisterImageServiceServer(s.grpc, &imageServer{s: s})
	go func() {
		defer close(s.served)
		_ = s.grpc.Serve(l)
	}()
	return s, nil
}

// Endpoint returns the server's address, "unix:///.../cri.sock".
func (s *Server) Endpoint() string { return s.endpoint }

// Close stops the server, ending calls in flight, and removes the temp dir
// if the server made it.
func (s *Server) Close() error {
	s.grpc.Stop()
	<-s.served
	s.stopStreaming()
	if s.ownDir {
		return os.RemoveAll(s.dir)
	}
	return os.Remove(filepath.Join(s.dir, "cri.sock"))
}

// Calls returns how often method (for example "CreateContainer") was called.
func (s *Server) Calls(method string) int {
	s.injMu.Lock()
	defer s.injMu.Unlock()
	return s.calls[method]
}

// CallCounts returns the call count of every method called so far.
func (s *Server) CallCounts() map[string]int {
	s.injMu.Lock()
	defer s.injMu.Unlock()
	m := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		m[k] = v
	}
	return m
}

// TotalCalls returns the number of calls of all methods.
func (s *Server) TotalCalls() int {
	s.injMu.Lock()
	defer s.injMu.Unlock()
	n := 0
	for _, v := range s.calls {
		n += v
	}
	return n
}

// ResetCalls sets all call counters to zero.
func (s *Server) ResetCalls() {
	s.injMu.Lock()
	defer s.injMu.Unlock()
	clear(s.calls)
}

// FailNext makes the next call of method fail with err. Calls queue: two
// FailNext fail the next two calls. err may be a gRPC status error
// (status.Error(codes.Unimplemented, ...)); other errors arrive as Unknown.
func (s *Server) FailNext(method string, err error) {
	s.injMu.Lock()
	defer s.injMu.Unlock()
	s.failNext[method] = append(s.failNext[method], err)
}

// SetError makes every call of method fail with err until SetError(method, nil).
func (s *Server) SetError(method string, err error) {
	s.injMu.Lock()
	defer s.injMu.Unlock()
	if err == nil {
		delete(s.errs, method)
		return
	}
	s.errs[method] = err
}

// SetLatency delays every call of method by d (0 removes the delay). The
// delay ends early, with the call, when the caller's deadline passes.
func (s *Server) SetLatency(method string, d time.Duration) {
	s.injMu.Lock()
	defer s.injMu.Unlock()
	if d <= 0 {
		delete(s.latencies, method)
		return
	}
	s.latencies[method] = d
}

// SetBehavior programs the containers named name (in any pod) from their
// next start on.
func (s *Server) SetBehavior(name string, b Behavior) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.behaviors[name] = b
}

// Exit makes a running container exit with code, as if its process ended.
func (s *Server) Exit(containerID string, code int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Runtime.Lock()
	defer s.Runtime.Unlock()
	c, ok := s.Runtime.Containers[containerID]
	if !ok {
		return fmt.Errorf("fakecri: container %q not found", containerID)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return fmt.Errorf("fakecri: container %q is %s, not running", containerID, c.State)
	}
	s.exitLocked(c, code)
	s.publishLocked(containerID, c.SandboxID, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	return nil
}

// Pull is one PullImage that reached the fake (not failed by injection).
type Pull struct {
	Image string
	// Auth is the credential sent, nil for an anonymous pull.
	Auth *runtimeapi.AuthConfig
}

// Pulls returns the pulls so far, in order.
func (s *Server) Pulls() []Pull {
	s.pullsMu.Lock()
	defer s.pullsMu.Unlock()
	return append([]Pull(nil), s.pulls...)
}

// ContainerIDs returns the IDs of the containers named name, sorted.
func (s *Server) ContainerIDs(name string) []string {
	s.Runtime.Lock()
	defer s.Runtime.Unlock()
	var ids []string
	for id, c := range s.Runtime.Containers {
		if c.Metadata.GetName() == name {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// SandboxConfig returns the config the sandbox with id was run with, nil
// for a sandbox unknown or removed.
func (s *Server) SandboxConfig(id string) *runtimeapi.PodSandboxConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sandboxConfigs[id]
}

// StopTimeout returns the timeout, in seconds, of the last StopContainer
// call for the container, and whether there was one.
func (s *Server) StopTimeout(containerID string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.stopTimeouts[containerID]
	return t, ok
}

// exitLocked needs s.mu and s.Runtime's lock.
func (s *Server) exitLocked(c *critest.FakeContainer, code int32) {
	if ch, ok := s.exits[c.Id]; ok {
		close(ch)
		delete(s.exits, c.Id)
	}
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.FinishedAt = s.clock.Now().UnixNano()
	c.ExitCode = code
	c.Reason = "Completed"
	if code != 0 {
		c.Reason = "Error"
	}
}

func methodName(full string) string {
	return full[strings.LastIndexByte(full, '/')+1:]
}

// inject counts the call and applies latency and injected errors.
func (s *Server) inject(ctx context.Context, method string) error {
	s.injMu.Lock()
	s.calls[method]++
	delay := s.latencies[method]
	err := s.errs[method]
	if err == nil {
		if q := s.failNext[method]; len(q) > 0 {
			err, s.failNext[method] = q[0], q[1:]
		}
	}
	s.injMu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return err
		}
		return status.Error(codes.Unknown, err.Error())
	}
	return nil
}

func (s *Server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := methodName(info.FullMethod)
	if err := s.inject(ctx, method); err != nil {
		return nil, err
	}
	resp, err := handler(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	s.injMu.Lock()
	rewrite := s.rewrites[method]
	s.injMu.Unlock()
	if rewrite != nil {
		resp = rewrite(resp)
	}
	return resp, nil
}

// SetResponseRewrite makes every successful call of method (for example
// "ListContainers") answer what rewrite returns instead of the response
// the fake made, which rewrite receives (a *runtimeapi.<Method>Response it
// may change in place). Tests of a client's defences use it to send
// malformed or enormous responses: a rewrite that returns a response of
// the wrong type makes the call fail on the server. A nil rewrite clears
// it. The rewrite runs without the Server's locks held.
func (s *Server) SetResponseRewrite(method string, rewrite func(resp any) any) {
	s.injMu.Lock()
	defer s.injMu.Unlock()
	if rewrite == nil {
		delete(s.rewrites, method)
		return
	}
	s.rewrites[method] = rewrite
}

func (s *Server) interceptStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.inject(ss.Context(), methodName(info.FullMethod)); err != nil {
		return err
	}
	return handler(srv, ss)
}

// errNotFound marks errors that become codes.NotFound.
var errNotFound = errors.New("not found")

// toStatus maps errors to gRPC codes at the edge, as containerd does.
func toStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, errNotFound) || strings.Contains(err.Error(), "not found") {
		return status.Error(codes.NotFound, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}
