package cri

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

var _ runtime.PodStatsLister = (*Manager)(nil)

// ListPodStats measures the pods with a ready sandbox and their running
// containers, as the kubelet's CRI stats provider: ListContainerStats for
// the containers, and ListPodSandboxStats for the pods' own CPU, memory
// and process count where the runtime implements it (once it answers
// Unimplemented it is not asked again; another failure of it leaves the
// pod-level figures out). Only containers and sandboxes with the kubelet's
// pod labels count.
func (m *Manager) ListPodStats(ctx context.Context) ([]runtime.PodStats, error) {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	sbs, err := m.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
	if err != nil {
		return nil, wrapErr("ListPodSandbox", err)
	}
	ctrs, err := m.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return nil, wrapErr("ListContainers", err)
	}
	cstats, err := m.rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
	if err != nil {
		return nil, wrapErr("ListContainerStats", err)
	}
	var sbStats map[string]*runtimeapi.PodSandboxStats
	if !m.noSandboxStats.Load() {
		resp, err := m.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
		if err != nil {
			switch err := wrapErr("ListPodSandboxStats", err); {
			case errors.Is(err, runtime.ErrNotSupported):
				m.noSandboxStats.Store(true)
			case ctx.Err() != nil:
				return nil, err
			default:
				// containerd fails the whole list when one sandbox has no
				// cgroup of its own (no pod cgroups): go on with the
				// containers' stats, as the kubelet by default does.
				m.log.V(4).Info("No pod sandbox stats", "err", err)
			}
		}
		sbStats = make(map[string]*runtimeapi.PodSandboxStats, len(resp.GetStats()))
		for _, s := range resp.GetStats() {
			sbStats[s.GetAttributes().GetId()] = s
		}
	}

	pods := make([]runtime.PodStats, 0, len(sbs.GetItems()))
	bySandbox := make(map[string]int, len(sbs.GetItems()))
	for _, sb := range newestSandboxes(sbs.GetItems()) {
		md := sb.GetMetadata()
		ps := runtime.PodStats{UID: types.UID(md.GetUid()), Name: md.GetName(), Namespace: md.GetNamespace(),
			SandboxID: sb.GetId(), CreatedAt: time.Unix(0, sb.GetCreatedAt())}
		if l := sbStats[sb.GetId()].GetLinux(); l != nil {
			ps.CPU, ps.Memory = cpuUsage(l.GetCpu()), memoryUsage(l.GetMemory())
			if pc := l.GetProcess().GetProcessCount(); pc != nil {
				ps.Processes = &pc.Value
			}
		}
		bySandbox[sb.GetId()] = len(pods)
		pods = append(pods, ps)
	}
	running := make(map[string]*runtimeapi.Container, len(ctrs.GetContainers()))
	for _, c := range ctrs.GetContainers() {
		if c.GetLabels()[LabelPodUID] != "" {
			running[c.GetId()] = c
		}
	}
	for _, s := range cstats.GetStats() {
		c := running[s.GetAttributes().GetId()]
		if c == nil {
			continue
		}
		i, ok := bySandbox[c.GetPodSandboxId()]
		if !ok {
			continue
		}
		name := s.GetAttributes().GetMetadata().GetName()
		if name == "" {
			name = c.GetMetadata().GetName()
		}
		cs := runtime.ContainerStats{
			ID: runtime.ContainerID{Type: m.name, ID: c.GetId()}, Name: name, CreatedAt: time.Unix(0, c.GetCreatedAt()),
			CPU: cpuUsage(s.GetCpu()), Memory: memoryUsage(s.GetMemory()),
		}
		if l := s.GetWritableLayer(); l != nil {
			cs.WritableLayer = &runtime.FsUsage{Time: time.Unix(0, l.GetTimestamp()), UsedBytes: value(l.GetUsedBytes()), InodesUsed: value(l.GetInodesUsed())}
		}
		pods[i].Containers = append(pods[i].Containers, cs)
	}
	return pods, nil
}

// newestSandboxes keeps the kubelet's pods' sandboxes, the newest per pod
// name when a pod was recreated under its name (the kubelet's
// removeTerminatedPods, all sandboxes here being ready).
func newestSandboxes(sbs []*runtimeapi.PodSandbox) []*runtimeapi.PodSandbox {
	newest := make(map[[2]string]*runtimeapi.PodSandbox, len(sbs))
	out := make([]*runtimeapi.PodSandbox, 0, len(sbs))
	for _, sb := range sbs {
		if sb.GetLabels()[LabelPodUID] == "" {
			continue
		}
		k := [2]string{sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName()}
		if prev, ok := newest[k]; !ok || sb.GetCreatedAt() > prev.GetCreatedAt() {
			newest[k] = sb
		}
	}
	for _, sb := range sbs {
		k := [2]string{sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName()}
		if newest[k] == sb {
			out = append(out, sb)
		}
	}
	return out
}

func cpuUsage(c *runtimeapi.CpuUsage) *runtime.CPUUsage {
	if c == nil {
		return nil
	}
	return &runtime.CPUUsage{Time: time.Unix(0, c.GetTimestamp()), UsageCoreNanoSeconds: value(c.GetUsageCoreNanoSeconds()), UsageNanoCores: value(c.GetUsageNanoCores())}
}

func memoryUsage(mu *runtimeapi.MemoryUsage) *runtime.MemoryUsage {
	if mu == nil {
		return nil
	}
	return &runtime.MemoryUsage{Time: time.Unix(0, mu.GetTimestamp()), WorkingSetBytes: value(mu.GetWorkingSetBytes()),
		UsageBytes: value(mu.GetUsageBytes()), RSSBytes: value(mu.GetRssBytes()), AvailableBytes: value(mu.GetAvailableBytes()),
		PageFaults: value(mu.GetPageFaults()), MajorPageFaults: value(mu.GetMajorPageFaults())}
}

func value(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	x := v.GetValue()
	return &x
}
