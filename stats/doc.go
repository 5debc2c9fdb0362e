// Package stats is the kubelet's stats provider: it builds the Summary
// API (k8s.io/kubelet/pkg/apis/stats/v1alpha1) that /stats/summary serves
// and metrics-server, `kubectl top`, the HPA and node-pressure eviction
// read, and the resource metrics of /metrics/resource.
//
// Sources, as the kubelet's CRI stats provider without cadvisor:
//
//   - pods and containers: the runtime's optional runtime.PodStatsLister
//     (runtime/cri: the CRI's ListContainerStats, and ListPodSandboxStats
//     where the runtime has it; runtime/fake: scripted usage). Without it,
//     the runtime's GetPods lists the pods and their cgroups measure them.
//     A pod's CPU and memory are the runtime's pod-level figures, else its
//     cgroup's (Config.PodCgroupRoot, when the agent uses QoS cgroups),
//     else its containers' sum; its ephemeral storage is its containers'
//     writable layers plus their log directories (no volumes yet);
//   - the node: the root cgroup (cgroup v1 or v2) for CPU and memory,
//     /proc/meminfo where the root cgroup has no memory usage (v2) and for
//     swap, /proc/stat for the boot time, statfs of Config.RootDir for
//     nodefs, pid_max, threads-max and /proc/loadavg for the rlimit stats;
//     a runtime whose node is not the host (runtime.NodeStatser: the fake,
//     a virtual-kubelet provider) gives all of these itself;
//   - the image filesystem: runtime.ImageFsInfoer, reported as both imageFs
//     and containerFs, on nodefs's figures when the runtime does not know
//     its capacity;
//   - the "pods" system container: the pods' cgroup root, whose working
//     set the allocatable memory eviction signal reads.
//
// CPU usageNanoCores is a rate between two samples, kept per container,
// pod and node, when the runtime gives only cumulative CPU time, exactly
// as the kubelet: only an updating read (Summary with updateStats, Update,
// Run every UpdatePeriod) takes a new sample and computes the rate; other
// reads (GetStatsSummary, what /stats/summary serves) return the last
// rate. Samples of what is gone are dropped after ten minutes on the
// clock.
//
// Eviction reads, from one Summary: Node.Memory.AvailableBytes and
// WorkingSetBytes (their sum is the capacity), Node.Fs and
// Node.Runtime.ImageFs (capacity, available, inodes, inodes free),
// Node.Rlimit (MaxPID, NumOfRunningProcesses), the "pods" system
// container, and per pod CPU, Memory.WorkingSetBytes, EphemeralStorage,
// ProcessStats and its containers' Rootfs and Logs.
//
// Usage:
//
//	sp, err := stats.New(stats.Config{NodeName: "node-1", Runtime: rt, PodCgroupRoot: "/kubepods"})
//	if err != nil { ... }
//	go sp.Run(ctx) // rates every 10s
//	srv, err := server.New(server.Config{Pods: a, Stats: sp, ResourceMetrics: sp})
//
// Where it sits: beside the agent, reading the runtime and the host; the
// server serves it, the eviction manager will read it. Not covered:
// volume stats, network stats, PSI, accelerators, user-defined metrics,
// and the kubelet, runtime and misc system containers.
package stats
