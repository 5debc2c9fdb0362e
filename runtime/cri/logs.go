package cri

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/crilog"
)

var _ runtime.ContainerLogs = (*Manager)(nil)

// GetContainerLogs reads the container's CRI log file (the path its status
// reports, under the pod log directory), as the kubelet does; following
// ends when the runtime no longer reports the container running.
func (m *Manager) GetContainerLogs(ctx context.Context, _ *v1.Pod, id runtime.ContainerID, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
	st, err := m.logContainerStatus(ctx, id.ID)
	if err != nil {
		return err
	}
	if st.GetLogPath() == "" {
		return fmt.Errorf("cri: container %s has no log path: %w", id, runtime.ErrNotFound)
	}
	running := func(ctx context.Context) bool {
		s, err := m.logContainerStatus(ctx, id.ID)
		return err == nil && s.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return crilog.ReadLogs(ctx, st.GetLogPath(), opts, crilog.Options{Running: running, Clock: m.clock}, stdout, stderr)
}

func (m *Manager) logContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	resp, err := m.rt.ContainerStatus(cctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	switch {
	case status.Code(err) == codes.NotFound:
		return nil, fmt.Errorf("cri: container %s: %w", id, runtime.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("cri: unable to retrieve container logs for %s: %w", id, err)
	case resp.GetStatus() == nil:
		return nil, fmt.Errorf("cri: container %s: runtime returned no status", id)
	}
	return resp.GetStatus(), nil
}
