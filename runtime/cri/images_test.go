package cri_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

func withImage(image string, policy v1.PullPolicy) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Image = image
		p.Spec.Containers[0].ImagePullPolicy = policy
	}
}

func TestPullPolicy(t *testing.T) {
	tests := []struct {
		name      string
		image     string
		policy    v1.PullPolicy
		wantPulls int
		wantErr   error
	}{
		{"IfNotPresent uses the present image", "busybox:1", v1.PullIfNotPresent, 0, nil},
		{"IfNotPresent pulls a missing image", "other:2", v1.PullIfNotPresent, 1, nil},
		{"Always pulls a present image", "busybox:1", v1.PullAlways, 1, nil},
		{"Never uses the present image", "busybox:1", v1.PullNever, 0, nil},
		{"Never fails on a missing image", "other:2", v1.PullNever, 0, runtime.ErrImageNeverPull},
		{"empty policy on :latest pulls", "busybox:latest", "", 1, nil},
		{"empty policy on a tag uses the present image", "busybox:1", "", 0, nil},
		{"empty image name is invalid", " ", v1.PullIfNotPresent, 0, runtime.ErrInvalidImageName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEnv(t)
			res := e.sync(t, newPod("p", "", withImage(tt.image, tt.policy)), nil)
			if tt.wantErr != nil {
				require.ErrorIs(t, res.Error(), tt.wantErr)
				require.Zero(t, e.srv.Calls("CreateContainer"))
			} else {
				require.NoError(t, res.Error())
				require.Equal(t, 1, e.srv.Calls("StartContainer"))
			}
			require.Equal(t, tt.wantPulls, e.srv.Calls("PullImage"))
		})
	}
}

func TestPullBackOff(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("p", "", withImage("missing:1", v1.PullIfNotPresent))
	e.srv.SetError("PullImage", errors.New("registry unreachable"))

	res := e.sync(t, pod, nil)
	require.ErrorIs(t, res.Error(), runtime.ErrImagePull, "first failure is ErrImagePull")
	require.Contains(t, res.Error().Error(), "registry unreachable")

	res = e.sync(t, pod, nil)
	require.ErrorIs(t, res.Error(), runtime.ErrImagePullBackOff, "then the pull backs off")
	require.Equal(t, 1, e.srv.Calls("PullImage"), "no pull during back-off")
	left, ok := runtime.BackOffRemaining(res.Error())
	require.True(t, ok, "the refusal says when the pull may be tried")
	require.Equal(t, 10*time.Second, left)

	e.clock.Step(10 * time.Second)
	res = e.sync(t, pod, nil)
	require.ErrorIs(t, res.Error(), runtime.ErrImagePull, "after 10s it pulls again")
	require.Equal(t, 2, e.srv.Calls("PullImage"))

	e.clock.Step(10 * time.Second)
	res = e.sync(t, pod, nil)
	require.ErrorIs(t, res.Error(), runtime.ErrImagePullBackOff, "the second delay is 20s")
	left, _ = runtime.BackOffRemaining(res.Error())
	require.Equal(t, 10*time.Second, left, "10s of the 20s left")

	e.srv.SetError("PullImage", nil)
	e.clock.Step(10 * time.Second)
	res = e.sync(t, pod, nil)
	require.NoError(t, res.Error(), "the pull succeeds once the registry is back")
	require.Equal(t, 1, e.srv.Calls("StartContainer"))
}

func TestPullQPS(t *testing.T) {
	e := newFakeEnv(t, func(c *cri.Config) { c.RegistryPullQPS = 1; c.RegistryBurst = 2 })
	pull := func() error { _, err := e.m.PullImage(e.ctx, "x:1", nil); return err }
	require.NoError(t, pull())
	require.NoError(t, pull(), "burst of 2")
	err := pull()
	require.ErrorIs(t, err, runtime.ErrImagePull)
	require.Contains(t, err.Error(), "pull QPS exceeded")
	require.Equal(t, 2, e.srv.Calls("PullImage"), "a throttled pull does not reach the runtime")
	e.clock.Step(time.Second)
	require.NoError(t, pull(), "a token per second")

	unlimited := newFakeEnv(t, func(c *cri.Config) { c.RegistryPullQPS = -1 })
	for range 20 {
		_, err := unlimited.m.PullImage(unlimited.ctx, "x:1", nil)
		require.NoError(t, err)
	}
}

func TestImageService(t *testing.T) {
	e := newFakeEnv(t)
	imgs, err := e.m.ListImages(e.ctx)
	require.NoError(t, err)
	require.Len(t, imgs, 1)
	require.Equal(t, []string{"busybox:1"}, imgs[0].RepoTags)
	require.NoError(t, e.m.RemoveImage(e.ctx, "busybox:1"))
	imgs, err = e.m.ListImages(e.ctx)
	require.NoError(t, err)
	require.Empty(t, imgs)
}
