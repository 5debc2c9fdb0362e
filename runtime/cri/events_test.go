package cri_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodekit/nodekit/runtime"
)

func TestWatchContainerEvents(t *testing.T) {
	e := newFakeEnv(t)
	ctx, cancel := context.WithCancel(e.ctx)
	events, err := e.m.WatchContainerEvents(ctx)
	require.NoError(t, err)

	pod := newPod("ev", "busybox:1")
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	sbID := "ev_test_uid-ev_0"
	cID := sbID + "_main_0"
	want := []struct {
		id  string
		typ runtime.ContainerEventType
	}{
		{sbID, runtime.ContainerCreatedEvent},
		{sbID, runtime.ContainerStartedEvent},
		{cID, runtime.ContainerCreatedEvent},
		{cID, runtime.ContainerStartedEvent},
	}
	var last runtime.ContainerEvent
	for _, w := range want {
		last = <-events
		require.Equal(t, w.id, last.ContainerID.ID)
		require.Equal(t, w.typ, last.Type)
		require.Equal(t, pod.UID, last.PodUID)
	}
	require.NotNil(t, last.PodStatus, "events carry the pod's status")
	c := last.PodStatus.FindContainerStatusByName("main")
	require.NotNil(t, c)
	require.Equal(t, runtime.ContainerStateRunning, c.State)
	require.Equal(t, sbID, c.SandboxID)
	require.NotNil(t, last.PodStatus.ReadySandbox())

	require.NoError(t, e.srv.Exit(cID, 2))
	ev := <-events
	require.Equal(t, runtime.ContainerStoppedEvent, ev.Type)
	require.Equal(t, 2, ev.PodStatus.FindContainerStatusByName("main").ExitCode)

	cancel()
	for range events {
	}
}

func TestWatchContainerEventsNotSupported(t *testing.T) {
	e := newFakeEnv(t)
	// containerd 1.6 has no GetContainerEvents.
	e.srv.SetError("GetContainerEvents", status.Error(codes.Unimplemented, "unknown method"))
	_, err := e.m.WatchContainerEvents(e.ctx)
	require.ErrorIs(t, err, runtime.ErrNotSupported)
}

func TestWatchContainerEventsProbeUsesInjectedClock(t *testing.T) {
	e := newFakeEnv(t)
	// A runtime that sends no headers yet: the manager waits its probe on
	// the injected clock, then takes the stream as open.
	e.srv.SetLatency("GetContainerEvents", time.Hour)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	type result struct {
		events <-chan runtime.ContainerEvent
		err    error
	}
	done := make(chan result, 1)
	go func() {
		events, err := e.m.WatchContainerEvents(ctx)
		done <- result{events, err}
	}()
	require.Eventually(t, e.clock.HasWaiters, 30*time.Second, time.Millisecond, "the probe waits on the injected clock")
	e.clock.Step(time.Second)
	r := <-done
	require.NoError(t, r.err)
	cancel()
	for range r.events {
	}
}
