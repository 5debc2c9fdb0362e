package runtime

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestCrashLoopBackOff(t *testing.T) {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", "uid-1"
	c := &v1.Container{Name: "app", Image: "busybox"}
	exited := func(finished time.Time) *ContainerStatus {
		return &ContainerStatus{Name: "app", State: ContainerStateExited, FinishedAt: finished}
	}
	tests := []struct {
		name     string
		statuses []*ContainerStatus
		restarts []time.Duration // earlier admitted restarts, as offsets of t0
		now      time.Duration   // since t0
		wantWait bool
	}{
		{"a container that never ran starts", nil, nil, 0, false},
		{"a running container is not held back", []*ContainerStatus{{Name: "app", State: ContainerStateRunning}}, nil, 0, false},
		{"the first exit restarts at once", []*ContainerStatus{exited(t0)}, nil, 0, false},
		{"a second exit within the delay waits",
			[]*ContainerStatus{exited(t0.Add(5 * time.Second)), exited(t0)}, []time.Duration{0}, 6 * time.Second, true},
		{"a second exit after the delay restarts",
			[]*ContainerStatus{exited(t0.Add(5 * time.Second)), exited(t0)}, []time.Duration{0}, 16 * time.Second, false},
		{"the newest exited instance counts, not an older one",
			[]*ContainerStatus{{Name: "app", State: ContainerStateCreated}, exited(t0.Add(5 * time.Second))}, []time.Duration{0}, 6 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(t0)
			b := NewBackoff(10*time.Second, time.Minute, 0, clk)
			for _, r := range tt.restarts {
				b.Next(BackoffKey(pod, c), t0.Add(r))
			}
			clk.SetTime(t0.Add(tt.now))
			st := &PodStatus{ContainerStatuses: tt.statuses}
			delay := b.Get(BackoffKey(pod, c))
			wmsg, wleft, waits := InCrashLoopBackOff(b, pod, c, st)
			assert.Equal(t, tt.wantWait, waits, "InCrashLoopBackOff agrees with CrashLoopBackOff")
			assert.Equal(t, delay, b.Get(BackoffKey(pod, c)), "InCrashLoopBackOff records nothing")
			msg, err := CrashLoopBackOff(b, pod, c, st)
			assert.Equal(t, wmsg, msg, "InCrashLoopBackOff says CrashLoopBackOff's message")
			if !tt.wantWait {
				assert.NoError(t, err)
				assert.Empty(t, msg)
				return
			}
			require.True(t, errors.Is(err, ErrCrashLoopBackOff), "err %v wraps ErrCrashLoopBackOff", err)
			assert.Equal(t, "back-off 10s restarting failed container=app pod=web_default(uid-1)", msg)
			assert.Equal(t, "CrashLoopBackOff", Reason(err))
			// finished at t0+5s, 10s delay, now t0+6s: 9s left
			left, ok := BackOffRemaining(fmt.Errorf("StartContainer: %w", err))
			assert.True(t, ok)
			assert.Equal(t, 9*time.Second, left)
			assert.Equal(t, left, wleft, "InCrashLoopBackOff says the same wait")
		})
	}
}

func TestBackOffRemainingOfOtherErrors(t *testing.T) {
	for _, err := range []error{nil, ErrCrashLoopBackOff, ErrImagePullBackOff, errors.New("x")} {
		_, ok := BackOffRemaining(err)
		assert.False(t, ok, "%v says no wait", err)
	}
}

func TestBackOffErrorSaysTheWaitAndWrapsTheRefusal(t *testing.T) {
	err := fmt.Errorf("sync: %w", BackOffError(fmt.Errorf("%w: Back-off pulling image", ErrImagePullBackOff), 7*time.Second))
	left, ok := BackOffRemaining(err)
	assert.True(t, ok)
	assert.Equal(t, 7*time.Second, left)
	assert.ErrorIs(t, err, ErrImagePullBackOff)
	assert.Equal(t, "sync: ImagePullBackOff: Back-off pulling image", err.Error())
	left, _ = BackOffRemaining(BackOffError(ErrImagePullBackOff, -time.Second))
	assert.Zero(t, left, "a wait already over is none")
}

func TestCrashLoopBackOffRecordsTheRestart(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	b := NewBackoff(10*time.Second, time.Minute, 0, clk)
	pod := &v1.Pod{}
	c := &v1.Container{Name: "app"}
	st := &PodStatus{ContainerStatuses: []*ContainerStatus{{Name: "app", State: ContainerStateExited, FinishedAt: t0}}}
	_, err := CrashLoopBackOff(b, pod, c, st)
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, b.Get(BackoffKey(pod, c)), "an admitted restart starts the delay")
	_, err = CrashLoopBackOff(b, pod, c, st)
	assert.ErrorIs(t, err, ErrCrashLoopBackOff, "the same exit seen again waits")
	_, err = CrashLoopBackOff(nil, pod, c, st)
	assert.NoError(t, err, "no back-off: never waits")
}
