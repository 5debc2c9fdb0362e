package agent

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/runtime/fake"
)

// bubbleAgent runs an agent inside the synctest bubble of the calling test,
// on the bubble's clock, with a resync period far beyond the test's horizon
// so that only events and deliberate wake-ups sync pods.
func bubbleAgent(t *testing.T, mod func(*Config)) (*Agent, *fake.Runtime, *podconfigtest.Recorder) {
	t.Helper()
	rt, err := fake.New(fake.Config{Clock: clock.RealClock{}})
	require.NoError(t, err)
	rec := podconfigtest.NewRecorder(0)
	c := Config{
		NodeName: "n1", Runtime: rt, Sources: []string{src}, Recorder: rec, Clock: clock.RealClock{},
		SyncFrequency: time.Hour,
	}
	if mod != nil {
		mod(&c)
	}
	a, err := New(c)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return a, rt, rec
}

func podOf(a *Agent, pod *v1.Pod) *v1.Pod {
	for _, p := range a.Pods() {
		if p.UID == pod.UID {
			return p
		}
	}
	return nil
}

func TestPodPastActiveDeadlineIsFailedAndKilledWhenTheDeadlineArrives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, rt, rec := bubbleAgent(t, nil)
		pod := newPod("deadline", v1.RestartPolicyAlways, "app")
		pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](30)
		a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}

		time.Sleep(5 * time.Second)
		synctest.Wait()
		require.Equal(t, v1.PodRunning, podOf(a, pod).Status.Phase)
		start := podOf(a, pod).Status.StartTime.Time

		time.Sleep(time.Until(start.Add(29 * time.Second)))
		synctest.Wait()
		require.Equal(t, v1.PodRunning, podOf(a, pod).Status.Phase, "before the deadline")

		// The deadline is met at the first sync tick (1s) after it, long
		// before the hour-long resync.
		time.Sleep(2*time.Second + 500*time.Millisecond)
		synctest.Wait()
		st := podOf(a, pod).Status
		assert.Equal(t, v1.PodFailed, st.Phase)
		assert.Equal(t, "DeadlineExceeded", st.Reason)
		assert.Equal(t, "Pod was active on the node longer than the specified deadline", st.Message)
		assert.Equal(t, 0, runningContainers(t, rt, pod.UID), "containers killed")

		var events []string
		for _, e := range rec.Events() {
			events = append(events, e.Type+" "+e.Reason)
		}
		assert.Equal(t, []string{"Normal DeadlineExceeded"}, events)
	})
}
