package fake_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

type seen struct {
	typ  runtime.ContainerEventType
	name string // of the container, found in the event's pod status
}

func drain(t *testing.T, ch <-chan runtime.ContainerEvent) []seen {
	t.Helper()
	var out []seen
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out
			}
			require.NotNil(t, ev.PodStatus)
			name := ""
			for _, cs := range ev.PodStatus.ContainerStatuses {
				if cs.ID == ev.ContainerID {
					name = cs.Name
				}
			}
			out = append(out, seen{ev.Type, name})
		default:
			return out
		}
	}
}

func TestWatchContainerEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, clk := newRuntime(t, fake.Config{})
		rt.SetContainerBehavior("job", fake.Behavior{Exit: true, ExitAfter: time.Minute, ExitCode: 1})
		ctx, cancel := context.WithCancel(context.Background())
		events, err := rt.WatchContainerEvents(ctx)
		require.NoError(t, err)

		pod := newPod("web", v1.RestartPolicyNever, ctr("app"), ctr("job"))
		require.NoError(t, sync(t, rt, pod, nil).Error())
		assert.Equal(t, []seen{
			{runtime.ContainerCreatedEvent, "app"}, {runtime.ContainerStartedEvent, "app"},
			{runtime.ContainerCreatedEvent, "job"}, {runtime.ContainerStartedEvent, "job"},
		}, drain(t, events))

		clk.Step(time.Minute - time.Second)
		synctest.Wait()
		assert.Empty(t, drain(t, events), "no exit before its time")
		clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, []seen{{runtime.ContainerStoppedEvent, "job"}}, drain(t, events), "a programmed exit is reported at its time")
		_, err = rt.GetPods(context.Background(), true)
		require.NoError(t, err)
		assert.Empty(t, drain(t, events), "and only once")

		pods, err := rt.GetPods(context.Background(), false)
		require.NoError(t, err)
		require.NoError(t, rt.KillPod(context.Background(), pod, *pods[0], nil))
		assert.Equal(t, []seen{{runtime.ContainerStoppedEvent, "app"}}, drain(t, events))

		require.NoError(t, rt.GarbageCollect(context.Background(), runtime.GCPolicy{MaxPerPodContainer: 0, MaxContainers: -1}, false))
		got := drain(t, events)
		require.Len(t, got, 2)
		assert.ElementsMatch(t, []runtime.ContainerEventType{runtime.ContainerDeletedEvent, runtime.ContainerDeletedEvent},
			[]runtime.ContainerEventType{got[0].typ, got[1].typ})

		cancel()
		synctest.Wait()
		_, open := <-events
		assert.False(t, open, "the stream closes when ctx ends")
	})
}

func TestWatchContainerEventsBreaks(t *testing.T) {
	t.Run("a consumer that falls behind loses its stream", func(t *testing.T) {
		rt, _ := newRuntime(t, fake.Config{EventBuffer: 3})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		events, err := rt.WatchContainerEvents(ctx)
		require.NoError(t, err)
		require.NoError(t, sync(t, rt, newPod("web", v1.RestartPolicyAlways, ctr("a"), ctr("b")), nil).Error())
		n := 0
		for range events {
			n++
		}
		assert.Equal(t, 3, n, "the buffered events, then the close")
	})
	t.Run("BreakContainerEvents closes every stream and leaves no goroutine behind", func(t *testing.T) {
		rt, _ := newRuntime(t, fake.Config{})
		// Never canceled: goleak in TestMain checks that breaking the stream
		// ends its goroutine anyway.
		ctx := context.Background()
		a, err := rt.WatchContainerEvents(ctx)
		require.NoError(t, err)
		b, err := rt.WatchContainerEvents(ctx)
		require.NoError(t, err)
		rt.BreakContainerEvents()
		_, okA := <-a
		_, okB := <-b
		assert.False(t, okA)
		assert.False(t, okB)
	})
}
