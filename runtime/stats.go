package runtime

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// CPUUsage is a CPU sample, as the CRI's CpuUsage: cumulative time and,
// when the runtime computes it, the rate.
type CPUUsage struct {
	Time time.Time
	// UsageCoreNanoSeconds is the CPU time used since the start.
	UsageCoreNanoSeconds *uint64
	// UsageNanoCores is the CPU use over the runtime's last interval;
	// nil: the consumer derives it from two samples.
	UsageNanoCores *uint64
}

// MemoryUsage is a memory sample, as the CRI's MemoryUsage; nil fields are
// unknown.
type MemoryUsage struct {
	Time time.Time
	// WorkingSetBytes is usage minus inactive file pages: what memory
	// pressure eviction ranks and the OOM killer weighs.
	WorkingSetBytes *uint64
	UsageBytes      *uint64
	RSSBytes        *uint64
	// AvailableBytes is the limit minus the working set, when limited.
	AvailableBytes  *uint64
	PageFaults      *uint64
	MajorPageFaults *uint64
}

// FsUsage is a filesystem sample: what one consumer uses of it, and when
// known the filesystem's size.
type FsUsage struct {
	Time       time.Time
	UsedBytes  *uint64
	InodesUsed *uint64
	// CapacityBytes, AvailableBytes, Inodes and InodesFree describe the
	// filesystem itself; nil when unknown.
	CapacityBytes  *uint64
	AvailableBytes *uint64
	Inodes         *uint64
	InodesFree     *uint64
}

// ContainerStats is one running container's usage, the CRI's
// ContainerStats.
type ContainerStats struct {
	ID        ContainerID
	Name      string
	CreatedAt time.Time
	CPU       *CPUUsage
	Memory    *MemoryUsage
	// WritableLayer is the container's writable layer (rootfs) usage.
	WritableLayer *FsUsage
}

// PodStats is one pod's usage (the CRI's PodSandboxStats, or its running
// containers' ContainerStats grouped by sandbox). Pod-level fields are nil
// when the runtime measures only containers.
type PodStats struct {
	UID             types.UID
	Name, Namespace string
	SandboxID       string
	// CreatedAt is the sandbox's creation: the pod's start in the summary.
	CreatedAt  time.Time
	CPU        *CPUUsage
	Memory     *MemoryUsage
	Processes  *uint64
	Containers []ContainerStats
}

// PodStatsLister is implemented by runtimes that measure their pods (the
// CRI's ListContainerStats and ListPodSandboxStats); the kubelet's stats
// Summary (package stats) is built on it.
type PodStatsLister interface {
	// ListPodStats returns the usage of the pods with a ready sandbox and
	// of their running containers; for a pod recreated under the same
	// name only the newest sandbox.
	ListPodStats(ctx context.Context) ([]PodStats, error)
}

// NodeStats is a node's usage as a runtime that is not the host measures
// it: the in-memory fake, a virtual-kubelet provider.
type NodeStats struct {
	// StartTime is when the node started (the host's boot).
	StartTime time.Time
	CPU       *CPUUsage
	// Memory's AvailableBytes plus WorkingSetBytes is the node's capacity.
	Memory *MemoryUsage
	// Fs is the node's root filesystem (nodefs): the kubelet's root
	// directory, pod logs and emptyDir volumes.
	Fs *FsUsage
	// MaxPID and Processes are the rlimit stats: the number of pids the
	// node allows and the number it runs.
	MaxPID, Processes *int64
}

// NodeStatser is implemented by runtimes whose node is not the host they
// run on; package stats then takes the node's figures from it rather than
// from /proc, the root cgroup and statfs.
type NodeStatser interface {
	NodeStats(ctx context.Context) (*NodeStats, error)
}
