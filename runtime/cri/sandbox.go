package cri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podutil"
)

// podLogDir is <PodLogsRoot>/<namespace>_<name>_<uid>, as the kubelet's.
func (m *Manager) podLogDir(pod *v1.Pod) string {
	return filepath.Join(m.cfg.PodLogsRoot, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

// sandboxConfig builds the PodSandboxConfig of the pod's attempt-th sandbox.
// It fails when the pod's DNS configuration cannot be computed or its
// cgroup cannot be made.
func (m *Manager) sandboxConfig(pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		LogDirectory: m.podLogDir(pod),
		Labels:       sandboxLabels(pod),
		Annotations:  sandboxAnnotations(pod),
	}
	dns, err := m.podDNS(pod)
	if err != nil {
		return nil, err
	}
	cfg.DnsConfig = dns
	if cfg.Hostname, err = m.sandboxHostname(pod); err != nil {
		return nil, err
	}
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			if p.HostPort <= 0 {
				continue
			}
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
				Protocol:      protocol(p.Protocol),
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: namespaceOptions(pod),
		Privileged:       podPrivileged(pod),
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups, sc.SupplementalGroupsPolicy = supplementalGroups(psc)
	}
	parent, err := m.podCgroupParent(pod)
	if err != nil {
		return nil, err
	}
	linux := &runtimeapi.LinuxPodSandboxConfig{SecurityContext: sc, CgroupParent: parent}
	if psc := pod.Spec.SecurityContext; psc != nil && len(psc.Sysctls) > 0 {
		linux.Sysctls = make(map[string]string, len(psc.Sysctls))
		for _, s := range psc.Sysctls {
			// runc wants dots; the API also allows slashes.
			linux.Sysctls[podutil.SysctlWithDots(s.Name)] = s.Value
		}
	}
	cfg.Linux = linux
	return cfg, nil
}

// supplementalGroups are the groups every container of the pod runs with,
// as the kubelet's: the fsGroup first (so a non-root container may use the
// volumes it owns), then spec.securityContext.supplementalGroups; and the
// policy for the image's own groups (Merge by default).
func supplementalGroups(psc *v1.PodSecurityContext) ([]int64, runtimeapi.SupplementalGroupsPolicy) {
	var groups []int64
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	groups = append(groups, psc.SupplementalGroups...)
	policy := runtimeapi.SupplementalGroupsPolicy_Merge
	if p := psc.SupplementalGroupsPolicy; p != nil && *p == v1.SupplementalGroupsPolicyStrict {
		policy = runtimeapi.SupplementalGroupsPolicy_Strict
	}
	return groups, policy
}

func protocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

func podPrivileged(pod *v1.Pod) bool {
	found := false
	forEachContainer(pod, func(c *v1.Container, _ string) bool {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			found = true
			return false
		}
		return true
	})
	return found
}

// forEachContainer calls f for init, regular and ephemeral containers with
// their type, until f returns false.
func forEachContainer(pod *v1.Pod, f func(c *v1.Container, ctype string) bool) {
	for i := range pod.Spec.InitContainers {
		if !f(&pod.Spec.InitContainers[i], containerTypeInit) {
			return
		}
	}
	for i := range pod.Spec.Containers {
		if !f(&pod.Spec.Containers[i], containerTypeRegular) {
			return
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		if !f(&c, containerTypeEphemeral) {
			return
		}
	}
}

// createSandbox makes the pod's log directory and runs its sandbox.
func (m *Manager) createSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig) (string, error) {
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return "", fmt.Errorf("creating pod log directory: %w", err)
	}
	ctx, cancel := m.callCtx(ctx, m.cfg.CallTimeout)
	defer cancel()
	resp, err := m.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: m.cfg.RuntimeHandler})
	if err != nil {
		return "", wrapErr("RunPodSandbox", err)
	}
	return resp.PodSandboxId, nil
}

func (m *Manager) stopSandbox(ctx context.Context, id string) error {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	if _, err := m.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		return wrapErr("StopPodSandbox", err)
	}
	return nil
}
