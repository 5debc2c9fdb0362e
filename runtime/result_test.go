package runtime

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

func TestPodSyncResultError(t *testing.T) {
	t.Run("no failed step is no error", func(t *testing.T) {
		var r PodSyncResult
		r.NewStep(StartContainer, "app")
		r.NewStep(CreatePodSandbox, "uid")
		assert.NoError(t, r.Error())
	})

	t.Run("failed steps match their sentinels", func(t *testing.T) {
		var r PodSyncResult
		r.NewStep(StartContainer, "ok")
		r.NewStep(StartContainer, "app").Fail(fmt.Errorf("back-off 10s: %w", ErrCrashLoopBackOff), "back-off 10s restarting failed container")
		r.NewStep(InitContainer, "init").Fail(ErrImagePullBackOff, "")
		err := r.Error()
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrCrashLoopBackOff)
		assert.ErrorIs(t, err, ErrImagePullBackOff)
		assert.NotErrorIs(t, err, ErrImagePull)
		assert.Contains(t, err.Error(), `StartContainer for "app" failed`)
		assert.Contains(t, err.Error(), "back-off 10s restarting failed container")
		assert.True(t, strings.HasSuffix(err.Error(), "InitContainer for \"init\" failed: ImagePullBackOff"), "no dangling separator without a message: %q", err)
		assert.NotContains(t, err.Error(), `"ok"`)
	})

	t.Run("a message the error already says is said once, as CrashLoopBackOff's", func(t *testing.T) {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
		c := &v1.Container{Name: "app"}
		b := NewBackoff(10*time.Second, 5*time.Minute, 10*time.Minute, clock.RealClock{})
		st := &PodStatus{ContainerStatuses: []*ContainerStatus{{Name: "app", State: ContainerStateExited, FinishedAt: time.Now()}}}
		_, _ = CrashLoopBackOff(b, pod, c, st) // the first exit is recorded
		msg, err := CrashLoopBackOff(b, pod, c, st)
		require.Error(t, err)
		var r PodSyncResult
		r.NewStep(StartContainer, "app").Fail(err, msg)
		text := r.Error().Error()
		assert.Equal(t, 1, strings.Count(text, "restarting failed container=app"), text)
		assert.ErrorIs(t, r.Error(), ErrCrashLoopBackOff)
	})

	t.Run("SyncError alone is the error", func(t *testing.T) {
		var r PodSyncResult
		boom := errors.New("status unusable")
		r.Fail(boom)
		assert.ErrorIs(t, r.Error(), boom)
	})

	t.Run("AddPodSyncResult adopts steps and SyncError", func(t *testing.T) {
		var inner PodSyncResult
		inner.NewStep(KillContainer, "app").Fail(ErrKillContainer, "timeout")
		boom := errors.New("boom")
		inner.Fail(boom)
		var outer PodSyncResult
		outer.NewStep(StartContainer, "x")
		outer.AddPodSyncResult(inner)
		assert.Len(t, outer.SyncResults, 2)
		assert.ErrorIs(t, outer.Error(), boom)
		assert.ErrorIs(t, outer.Error(), ErrKillContainer)

		var clean PodSyncResult
		outer.AddPodSyncResult(clean)
		assert.ErrorIs(t, outer.Error(), boom, "a result without SyncError keeps the old one")
	})
}

func TestReason(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil has no reason", nil, ""},
		{"sentinel gives its reason", ErrImagePull, "ErrImagePull"},
		{"wrapped sentinel gives its reason", fmt.Errorf("pull nginx: %w", ErrImagePullBackOff), "ImagePullBackOff"},
		{"crash loop", fmt.Errorf("x: %w", ErrCrashLoopBackOff), "CrashLoopBackOff"},
		{"sandbox creation", ErrCreatePodSandbox, "CreatePodSandboxError"},
		{"joined with a non-step error", errors.Join(errors.New("other"), ErrRunContainer), "RunContainerError"},
		{"non-step sentinel has no reason", ErrNotFound, ""},
		{"plain error has no reason", errors.New("CrashLoopBackOff"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Reason(tt.err))
		})
	}
}
