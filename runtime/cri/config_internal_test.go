package cri

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
)

func t0() time.Time { return time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC) }

func TestContainerConfig(t *testing.T) {
	m := &Manager{cfg: Config{PodLogsRoot: "/logs", PodsRoot: "/pods"}}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: v1.PodSpec{
			HostNetwork:     true,
			SecurityContext: &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
			Volumes:         []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv"}}}},
		},
	}
	c := &v1.Container{
		Name: "c", Image: "img", Command: []string{"echo", "$(X)"}, Args: []string{"$(Y)"}, WorkingDir: "/w",
		Env:          []v1.EnvVar{{Name: "X", Value: "x"}, {Name: "Y", Value: "$(X)-y"}},
		VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}},
		Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext: &v1.SecurityContext{RunAsUser: ptr.To[int64](7), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
			Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}}},
	}
	cfg, prep, err := m.containerConfig(context.Background(), pod, c, containerTypeRegular, 3, "sha256:abc", nil)
	require.NoError(t, err)
	require.Empty(t, prep.dirs)
	require.Empty(t, prep.files)
	require.NotNil(t, prep.hosts)
	require.Equal(t, uint32(3), cfg.Metadata.Attempt)
	require.Equal(t, "c/3.log", cfg.LogPath)
	require.Equal(t, "sha256:abc", cfg.Image.Image)
	require.Equal(t, []string{"echo", "x"}, cfg.Command)
	require.Equal(t, []string{"x-y"}, cfg.Args, "env refers to earlier env")
	require.Equal(t, "/w", cfg.WorkingDir)
	require.Equal(t, []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/srv", Readonly: true},
		{ContainerPath: "/etc/hosts", HostPath: "/pods/u/etc-hosts", SelinuxRelabel: true}}, cfg.Mounts, "a host-network pod gets the node's hosts file")
	r := cfg.Linux.Resources
	require.EqualValues(t, 256, r.CpuShares)
	require.EqualValues(t, 50000, r.CpuQuota)
	require.EqualValues(t, 100000, r.CpuPeriod)
	require.EqualValues(t, 64<<20, r.MemoryLimitInBytes)
	sc := cfg.Linux.SecurityContext
	require.EqualValues(t, 7, sc.RunAsUser.Value, "the container's user wins over the pod's")
	require.True(t, sc.NoNewPrivs)
	require.True(t, sc.ReadonlyRootfs)
	require.Equal(t, []string{"NET_ADMIN"}, sc.Capabilities.AddCapabilities)
	require.Equal(t, runtimeapi.NamespaceMode_NODE, sc.NamespaceOptions.Network)

	sb, err := m.sandboxConfig(pod, 2)
	require.NoError(t, err)
	require.Empty(t, sb.Hostname, "host-network sandboxes leave the hostname empty")
	require.Equal(t, "/logs/ns_p_u", sb.LogDirectory)
	require.EqualValues(t, 2, sb.Metadata.Attempt)
	require.Equal(t, runtimeapi.NamespaceMode_NODE, sb.Linux.SecurityContext.NamespaceOptions.Network)

}

func TestVolumes(t *testing.T) {
	m := &Manager{cfg: Config{PodsRoot: "/pods"}}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv"}}},
			{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "ram", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
			{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
			{Name: "nfs", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{}}},
		}},
	}
	mount := func(vm ...v1.VolumeMount) *v1.Container {
		return &v1.Container{Name: "c", VolumeMounts: vm, TerminationMessagePath: "/dev/termination-log"}
	}
	t.Run("hostPath, emptyDir with subPath, memory emptyDir, configMap (read-only) and the termination file", func(t *testing.T) {
		got, prep, err := m.mounts(pod, mount(
			v1.VolumeMount{Name: "host", MountPath: "/h", ReadOnly: true},
			v1.VolumeMount{Name: "cache", MountPath: "/c", SubPath: "sub"},
			v1.VolumeMount{Name: "ram", MountPath: "/r"},
			v1.VolumeMount{Name: "cm", MountPath: "/m"},
		), nil)
		require.NoError(t, err)
		require.Len(t, got, 5)
		require.Equal(t, &runtimeapi.Mount{ContainerPath: "/r", HostPath: "/pods/u/volumes/kubernetes.io~empty-dir/ram"}, got[2])
		require.Equal(t, &runtimeapi.Mount{ContainerPath: "/m", HostPath: "/pods/u/volumes/kubernetes.io~configmap/cm", Readonly: true}, got[3])
		got = append(got[:2], got[4])
		require.Equal(t, &runtimeapi.Mount{ContainerPath: "/h", HostPath: "/srv", Readonly: true}, got[0])
		require.Equal(t, &runtimeapi.Mount{ContainerPath: "/c", HostPath: "/pods/u/volumes/kubernetes.io~empty-dir/cache/sub"}, got[1])
		require.Equal(t, "/dev/termination-log", got[2].ContainerPath)
		require.Regexp(t, `^/pods/u/containers/c/[0-9a-f]{16}$`, got[2].HostPath)
		require.Equal(t, []subPathDir{{path: "/pods/u/volumes/kubernetes.io~empty-dir/cache/sub", volume: "/pods/u/volumes/kubernetes.io~empty-dir/cache"}}, prep.dirs, "the volume itself is the VolumeManager's")
		require.Equal(t, []string{got[2].HostPath}, prep.files)
	})
	for name, vm := range map[string]v1.VolumeMount{
		"nfs is refused":                   {Name: "nfs", MountPath: "/n"},
		"undeclared volume is refused":     {Name: "nope", MountPath: "/n"},
		"subPath leaving the volume fails": {Name: "cache", MountPath: "/c", SubPath: "../../etc"},
		"absolute subPath fails":           {Name: "cache", MountPath: "/c", SubPath: "/etc"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := m.mounts(pod, mount(vm), nil)
			require.ErrorIs(t, err, runtime.ErrCreateContainerConfig)
		})
	}
}

func TestNoResourcesGetMinimumShares(t *testing.T) {
	r := linuxResources(&v1.Container{})
	require.EqualValues(t, 2, r.CpuShares)
	require.Zero(t, r.CpuQuota)
	r = linuxResources(&v1.Container{Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}})
	require.EqualValues(t, 1024, r.CpuShares, "requests default to limits")
}
