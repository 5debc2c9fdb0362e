package admission

import (
	"fmt"
	"os"
	"regexp"
	goruntime "runtime"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodekit/nodekit/podutil"
)

// ReasonSysctlForbidden is the reason of a pod refused by Sysctls, the
// kubelet's.
const ReasonSysctlForbidden = "SysctlForbidden"

// safeSysctls are the kubelet's safe sysctls: namespaced, and without
// effect on other pods. kernel is the first kernel version where the sysctl
// is namespaced, "" for all.
var safeSysctls = [...]struct{ name, kernel string }{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_rmem", ""},
	{"net.ipv4.tcp_wmem", ""},
}

// SafeSysctls returns the kubelet's safe sysctls (SafeSysctlAllowlist) that
// a Linux kernel of version kernel (as /proc/sys/kernel/osrelease has it,
// "6.1.0-18-amd64") namespaces. A kernel version that does not parse ("")
// gives those that need no particular version, as the kubelet's; on other
// OSes there are none.
func SafeSysctls(kernel string) []string {
	if goruntime.GOOS != "linux" {
		return nil
	}
	v, _ := version.ParseGeneric(strings.TrimSpace(kernel))
	out := make([]string, 0, len(safeSysctls))
	for _, s := range safeSysctls {
		if s.kernel == "" || v != nil && v.AtLeast(version.MustParseGeneric(s.kernel)) {
			out = append(out, s.name)
		}
	}
	return out
}

// KernelVersion is the running kernel's release, from
// /proc/sys/kernel/osrelease, for SafeSysctls.
func KernelVersion() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "", fmt.Errorf("reading the kernel version: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// sysctlNamespace is the kernel namespace a sysctl belongs to, as the
// kubelet's NamespacedBy (k8s.io/component-helpers/node/util/sysctl).
type sysctlNamespace string

const (
	ipcNamespace     sysctlNamespace = "ipc"
	netNamespace     sysctlNamespace = "net"
	unknownNamespace sysctlNamespace = ""
)

func namespacedBy(s string) sysctlNamespace {
	switch {
	case s == "kernel.sem",
		strings.HasPrefix(s, "kernel.shm"), strings.HasPrefix(s, "kernel.msg"), strings.HasPrefix(s, "fs.mqueue."):
		return ipcNamespace
	case strings.HasPrefix(s, "net."):
		return netNamespace
	}
	return unknownNamespace
}

// sysctlPattern is the API's sysctl pattern (policy validation's
// SysctlContainSlashPatternFmt): segments separated by '.' or '/', the last
// one possibly ending in "*"; at most 253 characters.
var sysctlPattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$`)

const sysctlMaxLength = 253

// Sysctls refuses a pod that sets a sysctl (spec.securityContext.sysctls)
// not in allowed, as the kubelet's sysctl allowlist admit handler (reason
// SysctlForbidden, message "forbidden sysctl: ..."). allowed holds sysctl
// names and patterns ending in "*", with dots or slashes; each must be
// namespaced (IPC: kernel.sem, kernel.shm*, kernel.msg*, fs.mqueue.*;
// network: net.*), or Sysctls fails. A pod on the host's network may not set
// a network sysctl, nor one sharing the host's IPC namespace an IPC sysctl.
// The kubelet allows SafeSysctls(KernelVersion()) and its
// --allowed-unsafe-sysctls.
func Sysctls(allowed []string) (PodAdmitHandler, error) {
	names := map[string]sysctlNamespace{}
	prefixes := map[string]sysctlNamespace{}
	for _, p := range allowed {
		if len(p) > sysctlMaxLength || !sysctlPattern.MatchString(p) {
			return nil, fmt.Errorf("sysctl %q must have at most %d characters and match regex %s", p, sysctlMaxLength, sysctlPattern)
		}
		p = podutil.SysctlWithDots(p)
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			ns := namespacedBy(prefix)
			if ns == unknownNamespace {
				return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", p)
			}
			prefixes[prefix] = ns
			continue
		}
		ns := namespacedBy(p)
		if ns == unknownNamespace {
			return nil, fmt.Errorf("the sysctl %q are not known to be namespaced", p)
		}
		names[p] = ns
	}
	check := func(s string, hostNet, hostIPC bool) error {
		s = podutil.SysctlWithDots(s)
		ns, ok := names[s]
		if !ok {
			for p, pns := range prefixes {
				if strings.HasPrefix(s, p) {
					ns, ok = pns, true
					break
				}
			}
		}
		switch {
		case !ok:
			return fmt.Errorf("%q not allowlisted", s)
		case ns == ipcNamespace && hostIPC, ns == netNamespace && hostNet:
			return fmt.Errorf("%q not allowed with host %s enabled", s, ns)
		}
		return nil
	}
	return PodAdmitHandlerFunc(func(attrs *PodAdmitAttributes) PodAdmitResult {
		spec := &attrs.Pod.Spec
		if spec.SecurityContext == nil {
			return PodAdmitResult{Admit: true}
		}
		for _, s := range spec.SecurityContext.Sysctls {
			if err := check(s.Name, spec.HostNetwork, spec.HostIPC); err != nil {
				return PodAdmitResult{Reason: ReasonSysctlForbidden, Message: "forbidden sysctl: " + err.Error()}
			}
		}
		return PodAdmitResult{Admit: true}
	}), nil
}
