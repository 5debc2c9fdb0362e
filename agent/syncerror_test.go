package agent

import (
	"errors"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/runtime"
)

// crashLoopRefusal is runtime.CrashLoopBackOff's refusal of container name,
// which exited the given time ago under a 10s back-off.
func crashLoopRefusal(t *testing.T, name string, ago time.Duration) error {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := runtime.NewBackoff(10*time.Second, time.Minute, 0, clocktesting.NewFakePassiveClock(now))
	pod := newPod("p", v1.RestartPolicyAlways, name)
	c := &pod.Spec.Containers[0]
	st := &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{{Name: name, State: runtime.ContainerStateExited, FinishedAt: now.Add(-ago)}}}
	b.Next(runtime.BackoffKey(pod, c), now.Add(-time.Minute)) // an earlier restart
	_, err := runtime.CrashLoopBackOff(b, pod, c, st)
	if err == nil {
		t.Fatal("no back-off")
	}
	return err
}

// What a pod's sync tells the pod workers decides when the pod is synced
// again: a failure that is only containers waiting out their crash-loop
// back-off is due when the first back-off ends, not every TransientBackOff
// (each such sync a BackOff event) nor after the error back-off.
func TestSyncErrorSaysWhenToRetry(t *testing.T) {
	s := time.Second
	step := func(res *runtime.PodSyncResult, name string, err error) {
		res.NewStep(runtime.StartContainer, name).Fail(err, "")
	}
	tests := []struct {
		name          string
		result        func(t *testing.T) runtime.PodSyncResult
		wantNil       bool
		wantTransient bool
		wantRetry     time.Duration // -1: no RetryAfter
	}{
		{name: "a successful sync resyncs as usual", wantNil: true, wantRetry: -1,
			result: func(*testing.T) (r runtime.PodSyncResult) { r.NewStep(runtime.StartContainer, "app"); return }},
		{name: "a back-off-only failure is retried when the back-off ends, not every second", wantTransient: true, wantRetry: 7 * s,
			result: func(t *testing.T) (r runtime.PodSyncResult) { step(&r, "app", crashLoopRefusal(t, "app", 3*s)); return }},
		{name: "of two back-offs the earlier end counts", wantTransient: true, wantRetry: 2 * s,
			result: func(t *testing.T) (r runtime.PodSyncResult) {
				step(&r, "a", crashLoopRefusal(t, "a", 3*s))
				step(&r, "b", crashLoopRefusal(t, "b", 8*s))
				return
			}},
		{name: "an image pull back-off is retried when the pull may be tried again", wantTransient: true, wantRetry: 5 * s,
			result: func(t *testing.T) (r runtime.PodSyncResult) {
				step(&r, "a", runtime.BackOffError(fmt.Errorf("pulling: %w", runtime.ErrImagePullBackOff), 5*s))
				return
			}},
		{name: "an image pull back-off that does not say when it ends is retried soon", wantTransient: true, wantRetry: -1,
			result: func(t *testing.T) (r runtime.PodSyncResult) {
				step(&r, "a", crashLoopRefusal(t, "a", 3*s))
				step(&r, "b", fmt.Errorf("pulling: %w", runtime.ErrImagePullBackOff))
				return
			}},
		{name: "a mixed failure (back-off plus a real error) keeps the error back-off", wantRetry: -1,
			result: func(t *testing.T) (r runtime.PodSyncResult) {
				step(&r, "a", crashLoopRefusal(t, "a", 3*s))
				step(&r, "b", fmt.Errorf("%w: bad mount", runtime.ErrCreateContainer))
				return
			}},
		{name: "a pod-level failure beside a back-off keeps the error back-off", wantRetry: -1,
			result: func(t *testing.T) (r runtime.PodSyncResult) {
				step(&r, "a", crashLoopRefusal(t, "a", 3*s))
				r.Fail(errors.New("sandbox gone"))
				return
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := syncError(tt.result(t))
			if tt.wantNil {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, podworkers.ErrTransient); got != tt.wantTransient {
				t.Errorf("transient %v, want %v (%v)", got, tt.wantTransient, err)
			}
			d, ok := podworkers.RetryDelay(err)
			switch {
			case tt.wantRetry < 0 && ok:
				t.Errorf("retry after %v, want the %s back-off", d, map[bool]string{true: "transient", false: "error"}[tt.wantTransient])
			case tt.wantRetry >= 0 && (!ok || d != tt.wantRetry):
				t.Errorf("retry after %v (%v), want %v", d, ok, tt.wantRetry)
			}
		})
	}
}
