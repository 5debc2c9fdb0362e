package fakecri

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ExecResult programs what ExecSync answers for a command, and what an
// exec session at Exec's URL writes and exits with.
type ExecResult struct {
	Stdout, Stderr string
	ExitCode       int32
	// Hang makes the command outlive its timeout: ExecSync answers
	// DeadlineExceeded after the request's timeout (real time), as
	// containerd does, or when the call ends if it has none.
	Hang bool
	// EchoStdin makes a streamed exec (Exec's URL) with stdin copy it to
	// stdout, until the client closes it, after Stdout and before Stderr.
	EchoStdin bool
}

type execKey struct{ container, cmd string }

// SetExecResult programs ExecSync for cmd in containers named container;
// an empty cmd programs every command of it not programmed itself.
// Unprogrammed commands exit 0 with no output.
func (s *Server) SetExecResult(container string, cmd []string, res ExecResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.execs == nil {
		s.execs = map[execKey]ExecResult{}
	}
	s.execs[execKey{container, strings.Join(cmd, "\x00")}] = res
}

// ExecSync runs a programmed command in a running container.
func (r *runtimeServer) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	s := r.s
	s.mu.Lock()
	s.Runtime.Lock()
	c, ok := s.Runtime.Containers[req.ContainerId]
	var name string
	var running bool
	if ok {
		name, running = c.Metadata.Name, c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	s.Runtime.Unlock()
	res, found := s.execs[execKey{name, strings.Join(req.Cmd, "\x00")}]
	if !found {
		res = s.execs[execKey{name, ""}]
	}
	s.mu.Unlock()
	switch {
	case !ok:
		return nil, status.Errorf(codes.NotFound, "container %q not found", req.ContainerId)
	case !running:
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not running", req.ContainerId)
	}
	if res.Hang {
		if req.Timeout <= 0 {
			<-ctx.Done()
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		t := time.NewTimer(time.Duration(req.Timeout) * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			return nil, status.Errorf(codes.DeadlineExceeded, "timeout %ds exceeded", req.Timeout)
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return &runtimeapi.ExecSyncResponse{Stdout: []byte(res.Stdout), Stderr: []byte(res.Stderr), ExitCode: res.ExitCode}, nil
}
