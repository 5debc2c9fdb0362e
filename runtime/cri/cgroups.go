package cri

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodCgroups places pods in cgroups, the kubelet's pod container manager;
// *cm.Manager (package github.com/nodekit/nodekit/cm) fits.
type PodCgroups interface {
	// EnsurePod makes the pod's cgroup if missing and returns the cgroup
	// parent for its sandbox, in the runtime's cgroup driver's form.
	EnsurePod(pod *v1.Pod) (string, error)
	// DestroyPod removes the pod's cgroup once nothing of it runs.
	DestroyPod(uid types.UID) error
}

// SetPodCgroups sets Config.PodCgroups after New, for a cgroup manager that
// asks this Manager for the runtime's cgroup driver (CgroupDriver) first.
// Call it before the Manager syncs pods.
func (m *Manager) SetPodCgroups(pc PodCgroups) { m.podCgroups.Store(&pc) }

func (m *Manager) cgroups() PodCgroups {
	if pc := m.podCgroups.Load(); pc != nil {
		return *pc
	}
	return nil
}

// podCgroupParent is the sandbox's cgroup parent, "" without PodCgroups.
func (m *Manager) podCgroupParent(pod *v1.Pod) (string, error) {
	pc := m.cgroups()
	if pc == nil {
		return "", nil
	}
	parent, err := pc.EnsurePod(pod)
	if err != nil {
		return "", fmt.Errorf("failed to ensure that the pod's cgroups exist and are correctly applied: %w", err)
	}
	return parent, nil
}

// CgroupDriver asks the runtime for its cgroup driver, "systemd" or
// "cgroupfs" (the CRI's RuntimeConfig; containerd 1.6 answers
// runtime.ErrNotSupported). It makes the Manager a cm.DriverSource.
func (m *Manager) CgroupDriver(ctx context.Context) (string, error) {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	resp, err := m.rt.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	if err != nil {
		return "", wrapErr("RuntimeConfig", err)
	}
	if resp.GetLinux() == nil {
		return "", fmt.Errorf("cri RuntimeConfig: no linux config in the answer")
	}
	switch resp.GetLinux().GetCgroupDriver() {
	case runtimeapi.CgroupDriver_SYSTEMD:
		return "systemd", nil
	case runtimeapi.CgroupDriver_CGROUPFS:
		return "cgroupfs", nil
	}
	return "", fmt.Errorf("cri RuntimeConfig: unknown cgroup driver %v", resp.GetLinux().GetCgroupDriver())
}
