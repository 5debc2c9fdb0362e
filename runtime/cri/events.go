package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

var _ runtime.ContainerEventer = (*Manager)(nil)

// eventsProbe is how long WatchContainerEvents waits for the runtime to
// accept or refuse the stream. A runtime that sends no headers before its
// first event is taken as streaming after it.
const eventsProbe = time.Second

// WatchContainerEvents streams the runtime's container events (CRI
// GetContainerEvents) until ctx ends or the stream breaks; the channel is
// closed then. A runtime without the call (containerd 1.6) gives an error
// wrapping runtime.ErrNotSupported, so an evented PLEG falls back to relisting.
func (m *Manager) WatchContainerEvents(ctx context.Context) (<-chan runtime.ContainerEvent, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := m.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		cancel()
		return nil, wrapErr("GetContainerEvents", err)
	}
	// An Unimplemented answer ends the stream without headers; a serving
	// runtime sends headers (or its first event).
	headers := make(chan error, 1)
	go func() {
		md, err := stream.Header()
		if err == nil && md == nil {
			err = io.EOF // ended without headers: the status comes with Recv
		}
		headers <- err
	}()
	// From the injected clock: under a fake clock a stream that never answers
	// waits for ctx rather than for real time.
	probe := m.clock.NewTimer(eventsProbe)
	defer probe.Stop()
	var first *runtimeapi.ContainerEventResponse
	select {
	case err := <-headers:
		if err != nil {
			first, err = stream.Recv()
			if err != nil {
				cancel()
				if status.Code(err) == codes.Unimplemented || errors.Is(err, io.EOF) {
					return nil, fmt.Errorf("cri GetContainerEvents: %w", runtime.ErrNotSupported)
				}
				return nil, wrapErr("GetContainerEvents", err)
			}
		}
	case <-probe.C():
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
	out := make(chan runtime.ContainerEvent)
	go func() {
		defer cancel()
		defer close(out)
		ev := first
		for {
			if ev != nil {
				select {
				case out <- m.containerEvent(ev):
				case <-ctx.Done():
					return
				}
			}
			var err error
			if ev, err = stream.Recv(); err != nil {
				if ctx.Err() == nil {
					m.log.V(1).Info("container event stream ended", "err", err)
				}
				return
			}
		}
	}()
	return out, nil
}

func (m *Manager) containerEvent(ev *runtimeapi.ContainerEventResponse) runtime.ContainerEvent {
	out := runtime.ContainerEvent{ContainerID: m.id(ev.ContainerId), CreatedAt: unixTime(ev.CreatedAt)}
	switch ev.ContainerEventType {
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT:
		out.Type = runtime.ContainerCreatedEvent
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		out.Type = runtime.ContainerStartedEvent
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		out.Type = runtime.ContainerStoppedEvent
	case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
		out.Type = runtime.ContainerDeletedEvent
	}
	sb := ev.PodSandboxStatus
	if sb == nil {
		return out
	}
	out.PodUID = types.UID(sb.GetMetadata().GetUid())
	ps := &runtime.PodStatus{ID: out.PodUID, Name: sb.GetMetadata().GetName(), Namespace: sb.GetMetadata().GetNamespace(), TimeStamp: out.CreatedAt}
	ss := &runtime.SandboxStatus{ID: sb.Id, State: runtime.SandboxStateNotReady, Attempt: sb.GetMetadata().GetAttempt(), CreatedAt: unixTime(sb.CreatedAt)}
	ss.HostNetwork = sb.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
	if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
		ss.State = runtime.SandboxStateReady
		if ip := sb.GetNetwork().GetIp(); ip != "" && !ss.HostNetwork {
			ss.IPs = append(ss.IPs, ip)
			for _, a := range sb.GetNetwork().GetAdditionalIps() {
				ss.IPs = append(ss.IPs, a.Ip)
			}
		}
	}
	ps.IPs = ss.IPs
	ps.SandboxStatuses = []*runtime.SandboxStatus{ss}
	for _, c := range ev.ContainersStatuses {
		cs := m.containerStatus(c)
		cs.SandboxID = sb.Id
		ps.ContainerStatuses = append(ps.ContainerStatuses, cs)
	}
	sortNewestFirst(ps.ContainerStatuses)
	out.PodStatus = ps
	return out
}
