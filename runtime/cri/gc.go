package cri

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

var _ runtime.GarbageCollector = (*Manager)(nil)

// GarbageCollect removes dead (not running) containers older than
// policy.MinAge beyond policy.MaxPerPodContainer per pod and container name
// and beyond policy.MaxContainers in all, oldest first; then stopped
// sandboxes that hold no container and are not their pod's newest. With
// allSourcesReady it also removes whole, with their log directories, the
// pods policy.PodState lets go (the kubelet's ShouldPodContentBeRemoved:
// evicted, deleted and stopped, or unknown) once nothing of them runs; so a
// pod that finished keeps its newest dead containers and logs until it is
// deleted. Without policy.PodState the CRI cannot tell which pods are
// deleted and the pods KillPod stopped (and no SyncPod restarted) go. Pod
// cgroups (Config.PodCgroups) of pods without a sandbox go too.
func (m *Manager) GarbageCollect(ctx context.Context, policy runtime.GCPolicy, allSourcesReady bool) error {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	var cgroupErr error
	if allSourcesReady {
		cgroupErr = m.sweepPodCgroups(ctx)
	}
	cs, err := m.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{}, m.lists.callOptions()...)
	if err != nil {
		return wrapErr("ListContainers", err)
	}
	sbs, err := m.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}, m.lists.callOptions()...)
	if err != nil {
		return wrapErr("ListPodSandbox", err)
	}
	type pod struct {
		containers []*runtimeapi.Container
		sandboxes  []*runtimeapi.PodSandbox
		live       bool
	}
	pods := map[types.UID]*pod{}
	get := func(labels map[string]string) *pod {
		uid := types.UID(labels[LabelPodUID])
		if uid == "" {
			return nil // not ours to collect
		}
		if pods[uid] == nil {
			pods[uid] = &pod{}
		}
		return pods[uid]
	}
	for _, c := range cs.Containers {
		if p := get(c.Labels); p != nil {
			p.containers = append(p.containers, c)
			p.live = p.live || c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
		}
	}
	for _, sb := range sbs.Items {
		if p := get(sb.Labels); p != nil {
			p.sandboxes = append(p.sandboxes, sb)
			p.live = p.live || sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
		}
	}

	var errs []error
	removeContainer := func(id string) bool {
		// with its log files, as the kubelet's removeContainer
		if err := m.removeContainer(ctx, id); err != nil {
			errs = append(errs, err)
			return false
		}
		return true
	}
	removeSandbox := func(id string) {
		if _, err := m.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			errs = append(errs, wrapErr("RemovePodSandbox", err))
		}
	}
	removable := m.wasKilled
	if policy.PodState != nil {
		removable = policy.PodState.ShouldPodContentBeRemoved
	}
	now := m.clock.Now().UnixNano()
	var survivors []*runtimeapi.Container
	removed := map[string]bool{}
	for uid, p := range pods {
		if allSourcesReady && !p.live && removable(uid) {
			for _, c := range p.containers {
				removed[c.Id] = removeContainer(c.Id)
			}
			for _, sb := range p.sandboxes {
				removeSandbox(sb.Id)
			}
			if len(p.sandboxes) > 0 {
				md := p.sandboxes[0].Metadata
				errs = append(errs, m.removePodDirs(types.UID(md.GetUid()), md.GetName(), md.GetNamespace()))
			}
			m.forgetKilled(uid)
			continue
		}
		sort.Slice(p.containers, func(i, j int) bool { return p.containers[i].CreatedAt > p.containers[j].CreatedAt })
		perName := map[string]int{}
		for _, c := range p.containers {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING || now-c.CreatedAt < policy.MinAge.Nanoseconds() {
				continue
			}
			name := c.Labels[LabelContainerName]
			perName[name]++
			if policy.MaxPerPodContainer >= 0 && perName[name] > policy.MaxPerPodContainer {
				removed[c.Id] = removeContainer(c.Id)
				continue
			}
			survivors = append(survivors, c)
		}
	}
	if policy.MaxContainers >= 0 && len(survivors) > policy.MaxContainers {
		sort.Slice(survivors, func(i, j int) bool { return survivors[i].CreatedAt < survivors[j].CreatedAt })
		for _, c := range survivors[:len(survivors)-policy.MaxContainers] {
			removed[c.Id] = removeContainer(c.Id)
		}
	}
	// Stopped sandboxes without containers, except each pod's newest (it
	// carries the attempt count).
	for _, p := range pods {
		if len(p.sandboxes) < 2 {
			continue
		}
		used := map[string]bool{}
		for _, c := range p.containers {
			if !removed[c.Id] {
				used[c.PodSandboxId] = true
			}
		}
		sortSandboxesNewestFirst(p.sandboxes)
		for _, sb := range p.sandboxes[1:] {
			if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY && !used[sb.Id] {
				removeSandbox(sb.Id)
			}
		}
	}
	return errors.Join(append(errs, cgroupErr)...)
}

// removePodDirs removes the pod's log directory and its state under
// PodsRoot. The names come from labels anyone could set: only plain names
// are used in paths.
func (m *Manager) removePodDirs(uid types.UID, name, namespace string) error {
	if !plainName(string(uid)) {
		return nil
	}
	var errs []error
	if plainName(name) && plainName(namespace) {
		errs = append(errs, os.RemoveAll(filepath.Join(m.cfg.PodLogsRoot, namespace+"_"+name+"_"+string(uid))))
	}
	// Unmount before removing; never remove through a mount.
	if err := m.volumeManager().TearDown(uid); err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, os.RemoveAll(filepath.Join(m.cfg.PodsRoot, string(uid))))
	return errors.Join(errs...)
}

func plainName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

func (m *Manager) markKilled(uid types.UID) {
	m.killedMu.Lock()
	defer m.killedMu.Unlock()
	m.killed[uid] = struct{}{}
}

func (m *Manager) forgetKilled(uid types.UID) {
	m.killedMu.Lock()
	defer m.killedMu.Unlock()
	delete(m.killed, uid)
}

func (m *Manager) wasKilled(uid types.UID) bool {
	m.killedMu.Lock()
	defer m.killedMu.Unlock()
	_, ok := m.killed[uid]
	return ok
}
