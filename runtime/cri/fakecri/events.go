package fakecri

import (
	"sync"

	"google.golang.org/grpc/metadata"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// eventBuffer is how many events a GetContainerEvents stream may lag behind
// before further events to it are dropped.
const eventBuffer = 1024

type subscribers struct {
	mu   sync.Mutex
	subs map[chan *runtimeapi.ContainerEventResponse]struct{}
}

func (r *runtimeServer) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream runtimeapi.RuntimeService_GetContainerEventsServer) error {
	s := r.s
	ch := make(chan *runtimeapi.ContainerEventResponse, eventBuffer)
	s.events.mu.Lock()
	if s.events.subs == nil {
		s.events.subs = map[chan *runtimeapi.ContainerEventResponse]struct{}{}
	}
	s.events.subs[ch] = struct{}{}
	s.events.mu.Unlock()
	defer func() {
		s.events.mu.Lock()
		delete(s.events.subs, ch)
		s.events.mu.Unlock()
	}()
	// Headers tell the client the stream is established before any event.
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev := <-ch:
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

// publish is publishLocked for callers that hold s.mu only.
func (s *Server) publish(id, sandboxID string, typ runtimeapi.ContainerEventType) {
	s.Runtime.Lock()
	defer s.Runtime.Unlock()
	s.publishLocked(id, sandboxID, typ)
}

// publishLocked sends an event about container id (a container or a
// sandbox) to every stream. It needs s.mu and s.Runtime's lock.
func (s *Server) publishLocked(id, sandboxID string, typ runtimeapi.ContainerEventType) {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	if len(s.events.subs) == 0 {
		return
	}
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: typ,
		CreatedAt:          s.clock.Now().UnixNano(),
	}
	if sb, ok := s.Runtime.Sandboxes[sandboxID]; ok {
		ev.PodSandboxStatus = cloneSandbox(sb)
	}
	for _, c := range s.Runtime.Containers {
		if c.SandboxID == sandboxID {
			ev.ContainersStatuses = append(ev.ContainersStatuses, cloneContainer(&c.ContainerStatus))
		}
	}
	for ch := range s.events.subs {
		select {
		case ch <- ev:
		default: // a stream that lags that far loses events
		}
	}
}

func cloneSandbox(sb *critest.FakePodSandbox) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{
		Id: sb.Id, Metadata: sb.Metadata, State: sb.State, CreatedAt: sb.CreatedAt, Network: sb.Network,
		Linux: sb.Linux, Labels: sb.Labels, Annotations: sb.Annotations, RuntimeHandler: sb.RuntimeHandler,
	}
}

func cloneContainer(c *runtimeapi.ContainerStatus) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{
		Id: c.Id, Metadata: c.Metadata, State: c.State, CreatedAt: c.CreatedAt, StartedAt: c.StartedAt,
		FinishedAt: c.FinishedAt, ExitCode: c.ExitCode, Image: c.Image, ImageRef: c.ImageRef, Reason: c.Reason,
		Message: c.Message, Labels: c.Labels, Annotations: c.Annotations, Mounts: c.Mounts, LogPath: c.LogPath,
	}
}
