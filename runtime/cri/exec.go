package cri

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

var _ runtime.CommandRunner = (*Manager)(nil)

// ExecSync runs cmd in the container with the CRI's ExecSync. The runtime
// enforces timeout (rounded up to whole seconds, the CRI's unit); the call
// itself gets CallTimeout on top so the runtime can report the timeout,
// which comes back as an error wrapping runtime.ErrExecTimeout. With no
// timeout (lifecycle hooks) only ctx bounds the call, as the kubelet's.
func (m *Manager) ExecSync(ctx context.Context, id runtime.ContainerID, cmd []string, timeout time.Duration) ([]byte, []byte, int, error) {
	secs := int64((timeout + time.Second - 1) / time.Second)
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = m.callCtx(ctx, timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	resp, err := m.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id.ID, Cmd: cmd, Timeout: secs})
	if err != nil {
		if status.Code(err) == codes.DeadlineExceeded {
			return nil, nil, 0, fmt.Errorf("cri ExecSync %q: %w: %v", strings.Join(cmd, " "), runtime.ErrExecTimeout, status.Convert(err).Message())
		}
		return nil, nil, 0, wrapErr("ExecSync", err)
	}
	return resp.Stdout, resp.Stderr, int(resp.ExitCode), nil
}
