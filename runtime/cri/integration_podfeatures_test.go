package cri_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/volume"
)

// runToExit runs pod on containerd until its container "main" exits and
// returns that container's status (its message is the termination file).
func runToExit(t *testing.T, pod *v1.Pod) *runtime.ContainerStatus {
	t.Helper()
	endpoint := testenv.CRIEndpoint(t)
	podsRoot := t.TempDir()
	vols, err := volume.New(volume.Config{PodsRoot: podsRoot})
	require.NoError(t, err)
	m, err := cri.New(context.Background(), cri.Config{Endpoint: endpoint, PodLogsRoot: t.TempDir(), PodsRoot: podsRoot, Volumes: vols})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	cleanup(t, m, pod)
	st := syncUntil(t, context.Background(), m, pod, nil, 100, 100*time.Millisecond, func(st *runtime.PodStatus) bool {
		c := st.FindContainerStatusByName("main")
		return c != nil && c.State == runtime.ContainerStateExited
	})
	return st.FindContainerStatusByName("main")
}

// A busybox pod's /etc/hosts is the kubelet's: its IP with its hostname,
// and its hostAliases; its hostname is spec.hostname.
func TestEtcHostsOnContainerd(t *testing.T) {
	image := testenv.TestImage(t)
	pod := realPod("hosts", image, func(p *v1.Pod) {
		p.Spec.Hostname = "web"
		p.Spec.HostAliases = []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo.remote", "bar.remote"}}}
		p.Spec.Containers[0].Command = []string{"sh", "-c", `{ hostname; cat /etc/hosts; } > /dev/termination-log`}
	})
	c := runToExit(t, pod)
	require.Equal(t, 0, c.ExitCode, c.Message)
	lines := strings.Split(c.Message, "\n")
	require.Equal(t, "web", lines[0], "the sandbox's hostname")
	require.Equal(t, "# Kubernetes-managed hosts file.", lines[1])
	require.Contains(t, c.Message, "127.0.0.1\tlocalhost\n")
	require.Contains(t, c.Message, "\n# Entries added by HostAliases.\n123.45.67.89\tfoo.remote\tbar.remote")
	var podIPLine bool
	for _, l := range lines {
		if f := strings.Split(l, "\t"); len(f) == 2 && f[1] == "web" && f[0] != "127.0.0.1" {
			podIPLine = true
		}
	}
	require.True(t, podIPLine, "a line <pod IP>\\tweb in:\n%s", c.Message)
}

// A container running as a user of its own writes to an emptyDir through
// the pod's fsGroup, and what it writes is the group's.
func TestFSGroupEmptyDirOnContainerd(t *testing.T) {
	image := testenv.TestImage(t)
	pod := realPod("fsgroup", image, func(p *v1.Pod) {
		p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1001), RunAsGroup: ptr.To[int64](1001), FSGroup: ptr.To[int64](4321)}
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		p.Spec.Containers[0].Command = []string{"sh", "-c", `set -e
echo hi > /scratch/f
printf '%s|%s|%s' "$(id -G)" "$(stat -c %g /scratch/f)" "$(cat /scratch/f)" > /dev/termination-log`}
	})
	c := runToExit(t, pod)
	require.Equal(t, 0, c.ExitCode, c.Message)
	parts := strings.Split(c.Message, "|")
	require.Len(t, parts, 3, c.Message)
	require.Contains(t, strings.Fields(parts[0]), "4321", "the fsGroup is a supplemental group")
	require.Equal(t, "4321", parts[1], "the file is the fsGroup's (the emptyDir is setgid)")
	require.Equal(t, "hi", parts[2])
}
