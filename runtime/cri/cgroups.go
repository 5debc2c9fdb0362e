package cri

import (
	"context"
	"errors"
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

// podCgroupLister is a PodCgroups that lists the pods it has cgroups for
// (*cm.Manager does); GarbageCollect then removes those of pods the runtime
// no longer has, as the kubelet's housekeeping removes orphaned pod cgroups.
type podCgroupLister interface {
	PodUIDs() ([]types.UID, error)
}

// creatingSandbox marks uid's sandbox as being made from its cgroup until
// the returned func is called, so that sweepPodCgroups leaves the cgroup.
func (m *Manager) creatingSandbox(uid types.UID) func() {
	m.creatingMu.Lock()
	if m.creating == nil {
		m.creating = map[types.UID]int{}
	}
	m.creating[uid]++
	m.creatingMu.Unlock()
	return func() {
		m.creatingMu.Lock()
		if m.creating[uid]--; m.creating[uid] <= 0 {
			delete(m.creating, uid)
		}
		m.creatingMu.Unlock()
	}
}

// sweepPodCgroups removes the cgroups of pods with no sandbox left on the
// runtime (a pod killed while the agent was down, a DestroyPod that
// failed). Pod cgroups are listed before the sandboxes, so a pod whose
// sandbox is made meanwhile is either in the list or marked creating.
func (m *Manager) sweepPodCgroups(ctx context.Context) error {
	pc := m.cgroups()
	lister, ok := pc.(podCgroupLister)
	if !ok {
		return nil
	}
	uids, err := lister.PodUIDs()
	if err != nil || len(uids) == 0 {
		return err
	}
	sbs, err := m.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return wrapErr("ListPodSandbox", err)
	}
	has := make(map[types.UID]bool, len(sbs.Items))
	for _, sb := range sbs.Items {
		has[types.UID(sb.GetMetadata().GetUid())] = true
	}
	m.creatingMu.Lock()
	defer m.creatingMu.Unlock()
	var errs []error
	for _, uid := range uids {
		if has[uid] || m.creating[uid] > 0 {
			continue
		}
		m.log.V(1).Info("removing the cgroup of a pod without sandbox", "podUID", uid)
		if err := pc.DestroyPod(uid); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
