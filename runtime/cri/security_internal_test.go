package cri

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestSupplementalGroups(t *testing.T) {
	strict := v1.SupplementalGroupsPolicyStrict
	tests := []struct {
		name   string
		psc    *v1.PodSecurityContext
		groups []int64
		policy runtimeapi.SupplementalGroupsPolicy
	}{
		{name: "none without a security context"},
		{name: "the fsGroup first, then the supplemental groups", psc: &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000), SupplementalGroups: []int64{5, 6}},
			groups: []int64{2000, 5, 6}},
		{name: "the fsGroup alone", psc: &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}, groups: []int64{2000}},
		{name: "the Strict policy", psc: &v1.PodSecurityContext{SupplementalGroups: []int64{5}, SupplementalGroupsPolicy: &strict},
			groups: []int64{5}, policy: runtimeapi.SupplementalGroupsPolicy_Strict},
	}
	m := &Manager{cfg: Config{PodLogsRoot: "/logs", PodsRoot: "/pods"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
				Spec: v1.PodSpec{SecurityContext: tt.psc, Containers: []v1.Container{{Name: "c"}}}}
			sb, err := m.sandboxConfig(pod, 0)
			require.NoError(t, err)
			require.Equal(t, tt.groups, sb.Linux.SecurityContext.SupplementalGroups, "the sandbox's")
			require.Equal(t, tt.policy, sb.Linux.SecurityContext.SupplementalGroupsPolicy)
			sc := securityContext(pod, &pod.Spec.Containers[0])
			require.Equal(t, tt.groups, sc.SupplementalGroups, "the container's")
			require.Equal(t, tt.policy, sc.SupplementalGroupsPolicy)
		})
	}
}

func TestSubPathOfASetgidVolumeIsSetgid(t *testing.T) {
	vol := t.TempDir()
	require.NoError(t, os.Chmod(vol, 0o777|fs.ModeSetgid))
	plain := t.TempDir()
	p := hostPaths{dirs: []string{filepath.Join(vol, "sub"), filepath.Join(plain, "sub")}}
	require.NoError(t, p.create())
	info, err := os.Stat(filepath.Join(vol, "sub"))
	require.NoError(t, err)
	require.Equal(t, 0o777|fs.ModeSetgid|fs.ModeDir, info.Mode())
	info, err = os.Stat(filepath.Join(plain, "sub"))
	require.NoError(t, err)
	require.Equal(t, 0o777|fs.ModeDir, info.Mode())
}

func TestSandboxSysctlsAreDotted(t *testing.T) {
	m := &Manager{cfg: Config{PodLogsRoot: "/logs", PodsRoot: "/pods"}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{
			{Name: "net/ipv4/ip_local_port_range", Value: "1024 65000"},
			{Name: "net/ipv4/conf/eno2.100/rp_filter", Value: "0"},
			{Name: "kernel.shm_rmid_forced", Value: "1"},
		}}}}
	sb, err := m.sandboxConfig(pod, 0)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"net.ipv4.ip_local_port_range": "1024 65000", "net.ipv4.conf.eno2/100.rp_filter": "0",
		"kernel.shm_rmid_forced": "1"}, sb.Linux.Sysctls)
}
