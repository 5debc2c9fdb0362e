package cri_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/objects/objectstest"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/volume"
)

func TestConfigMapVolumeWaitsForItsObjectThenRuns(t *testing.T) {
	api := objectstest.New()
	cache := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, TTL: 1})
	var pods string
	e := newFakeEnv(t, func(c *cri.Config) {
		pods = c.PodsRoot
		v, err := volume.New(volume.Config{PodsRoot: c.PodsRoot, Objects: cache})
		require.NoError(t, err)
		c.Volumes = v
	})
	pod := newPod("cmvol", "busybox:1", func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "app"}}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/app"}}
	})

	res := e.sync(t, pod, nil)
	require.Equal(t, "CreateContainerConfigError", runtime.Reason(res.Error()))
	require.Contains(t, res.Error().Error(), `MountVolume.SetUp failed for volume "cfg" : configmaps "app" not found`)
	require.Zero(t, e.srv.Calls("RunPodSandbox"), "no sandbox before the volumes are ready")

	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "test", Name: "app"}, Data: map[string]string{"mode": "fast"}})
	res = e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	require.Equal(t, 1, e.srv.Calls("StartContainer"))
	dir := filepath.Join(pods, "uid-cmvol", "volumes", "kubernetes.io~configmap", "cfg")
	b, err := os.ReadFile(filepath.Join(dir, "mode"))
	require.NoError(t, err)
	require.Equal(t, "fast", string(b))

	t.Run("an update reaches the running pod at its next sync", func(t *testing.T) {
		api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "test", Name: "app"}, Data: map[string]string{"mode": "slow"}})
		require.NoError(t, e.sync(t, pod, nil).Error())
		b, err := os.ReadFile(filepath.Join(dir, "mode"))
		require.NoError(t, err)
		require.Equal(t, "slow", string(b))
	})
	t.Run("a deleted object leaves a running pod alone", func(t *testing.T) {
		api.Delete("configmaps", "test", "app")
		require.NoError(t, e.sync(t, pod, nil).Error())
		require.FileExists(t, filepath.Join(dir, "mode"), "last contents kept")
	})
	t.Run("removed with the pod", func(t *testing.T) {
		pods, err := e.m.GetPods(e.ctx, false)
		require.NoError(t, err)
		require.NoError(t, e.m.KillPod(e.ctx, pod, *pods[0], nil))
		require.NoError(t, e.m.RemovePod(e.ctx, pod.UID))
		require.NoDirExists(t, dir)
	})
}
