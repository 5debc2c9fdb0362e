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

func TestSubPathDirsTakeTheVolumesMode(t *testing.T) {
	tests := []struct {
		name    string
		volume  fs.FileMode
		subPath string
		exists  fs.FileMode // 0: the subPath is missing
		want    fs.FileMode
	}{
		{name: "a plain volume's subPath is world-writable", volume: 0o777, subPath: "sub", want: 0o777},
		{name: "a setgid volume's subPath is setgid", volume: 0o777 | fs.ModeSetgid, subPath: "sub", want: 0o777 | fs.ModeSetgid},
		{name: "a tmpfs volume's subPath keeps the sticky bit with setgid", volume: 0o777 | fs.ModeSetgid | fs.ModeSticky, subPath: "sub",
			want: 0o777 | fs.ModeSetgid | fs.ModeSticky},
		{name: "every missing directory of a nested subPath gets the mode", volume: 0o777 | fs.ModeSticky, subPath: "a/b",
			want: 0o777 | fs.ModeSticky},
		{name: "an existing subPath is left as it is", volume: 0o777 | fs.ModeSetgid, subPath: "sub", exists: 0o750, want: 0o750},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vol := filepath.Join(t.TempDir(), "vol")
			require.NoError(t, os.Mkdir(vol, 0o700))
			require.NoError(t, os.Chmod(vol, tt.volume))
			p := filepath.Join(vol, tt.subPath)
			if tt.exists != 0 {
				require.NoError(t, os.Mkdir(p, 0o700))
				require.NoError(t, os.Chmod(p, tt.exists))
			}
			require.NoError(t, hostPaths{dirs: []subPathDir{{path: p, volume: vol}}}.create())
			for d := p; d != vol; d = filepath.Dir(d) {
				info, err := os.Stat(d)
				require.NoError(t, err)
				require.Equal(t, tt.want|fs.ModeDir, info.Mode(), d)
			}
		})
	}
	t.Run("a subPath that is a file is an error", func(t *testing.T) {
		vol := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(vol, "f"), nil, 0o644))
		require.Error(t, hostPaths{dirs: []subPathDir{{path: filepath.Join(vol, "f"), volume: vol}}}.create())
	})
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
