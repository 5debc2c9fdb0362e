package admission_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/admission"
)

func TestSafeSysctlsDependOnTheKernel(t *testing.T) {
	tests := []struct {
		kernel   string
		has, not []string
	}{
		{kernel: "6.1.0-18-amd64", has: []string{"kernel.shm_rmid_forced", "net.ipv4.tcp_fin_timeout", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_rmem"}},
		{kernel: "4.5.0", has: []string{"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_keepalive_probes"}, not: []string{"net.ipv4.tcp_fin_timeout"}},
		{kernel: "3.10.0-1160.el7.x86_64", has: []string{"net.ipv4.ip_local_port_range"}, not: []string{"net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time"}},
		{kernel: "", has: []string{"net.ipv4.ping_group_range"}, not: []string{"net.ipv4.ip_local_reserved_ports"}},
	}
	for _, tt := range tests {
		t.Run("kernel "+tt.kernel, func(t *testing.T) {
			got := admission.SafeSysctls(tt.kernel)
			for _, s := range tt.has {
				require.Contains(t, got, s)
			}
			for _, s := range tt.not {
				require.NotContains(t, got, s)
			}
		})
	}
}

func TestSysctls(t *testing.T) {
	pod := func(hostNet, hostIPC bool, names ...string) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{HostNetwork: hostNet, HostIPC: hostIPC, SecurityContext: &v1.PodSecurityContext{}}}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
		}
		return p
	}
	allowed := append(admission.SafeSysctls("6.1.0"), "kernel.msg*", "net.core.somaxconn")
	h, err := admission.Sysctls(allowed)
	require.NoError(t, err)
	tests := []struct {
		name string
		pod  *v1.Pod
		msg  string // "" admits
	}{
		{name: "no security context is admitted", pod: &v1.Pod{}},
		{name: "a safe sysctl is admitted", pod: pod(false, false, "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range")},
		{name: "a safe sysctl with slashes is admitted", pod: pod(false, false, "net/ipv4/tcp_syncookies")},
		{name: "an allowed unsafe name is admitted", pod: pod(false, false, "net.core.somaxconn")},
		{name: "an allowed unsafe pattern is admitted", pod: pod(false, false, "kernel.msgmax")},
		{name: "an unsafe sysctl is refused", pod: pod(false, false, "kernel.shm_rmid_forced", "kernel.sem"),
			msg: `forbidden sysctl: "kernel.sem" not allowlisted`},
		{name: "a node-level sysctl is refused", pod: pod(false, false, "vm.swappiness"), msg: `forbidden sysctl: "vm.swappiness" not allowlisted`},
		{name: "a network sysctl is refused on the host's network", pod: pod(true, false, "net.ipv4.ip_local_port_range"),
			msg: `forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host net enabled`},
		{name: "an IPC sysctl is refused with the host's IPC", pod: pod(false, true, "kernel.msgmax"),
			msg: `forbidden sysctl: "kernel.msgmax" not allowed with host ipc enabled`},
		{name: "an IPC sysctl is admitted on the host's network", pod: pod(true, false, "kernel.shm_rmid_forced")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.Admit(&admission.PodAdmitAttributes{Pod: tt.pod})
			if tt.msg == "" {
				require.True(t, r.Admit, r.Message)
				return
			}
			require.False(t, r.Admit)
			require.Equal(t, admission.ReasonSysctlForbidden, r.Reason)
			require.Equal(t, tt.msg, r.Message)
		})
	}
}

func TestSysctlsRejectsBadAllowlists(t *testing.T) {
	for name, allowed := range map[string][]string{
		"not namespaced":         {"vm.swappiness"},
		"pattern not namespaced": {"kernel.*"},
		"not a sysctl":           {"Net.Core"},
		"wildcard inside":        {"net.*.foo"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := admission.Sysctls(allowed)
			require.Error(t, err)
		})
	}
}
