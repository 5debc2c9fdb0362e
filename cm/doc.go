// Package cm is the part of the kubelet's container manager that places
// pods in cgroups: the QoS hierarchy (kubepods, kubepods/burstable,
// kubepods/besteffort), one cgroup per pod with its pod-level limits, and
// node allocatable.
//
// Where it sits: runtime/cri calls EnsurePod before it creates a sandbox
// and passes the result as the sandbox's cgroup parent, DestroyPod once the
// pod is killed, and PodUIDs in garbage collection to remove the cgroups of
// pods without sandbox (cri.Config.PodCgroups); a node's status reports
// Allocatable (SetNodeAllocatable fits node.Setter). A runtime that is not
// CRI may call the same methods.
//
// What it owns:
//   - the QoS class as the API defines it (podutil.QOSClass) and the
//     kubelet's cgroup names for both drivers: cgroupfs
//     "/kubepods/burstable/pod<uid>", systemd
//     "kubepods-burstable-pod<uid>.slice" (Name);
//   - pod limits as the kubelet's ResourceConfigForPod (PodResources): cpu
//     shares (cgroup v2: weight) from requests, CFS quota and memory limit
//     when every container or the pod level sets them, pod-level resources
//     (spec.resources) winning over the containers' totals, the minimal
//     shares for BestEffort, optional pids limit; burstable's shares follow
//     its pods' requests;
//   - the driver: Config.Driver, or the runtime's (DriverSource, the CRI's
//     RuntimeConfig on containerd 2.x), which wins on a mismatch with a
//     CgroupDriverMismatch warning event; systemd where systemd does not
//     run is refused at New (containerd 1.6 cannot tell its driver);
//   - cgroup v2 and v1 (every v1 hierarchy, cpuset cpus and mems copied
//     down), detected from the mount point;
//   - node allocatable: capacity minus system-reserved, kube-reserved and
//     the hard eviction thresholds, optionally enforced on kubepods.
//
// Not covered: systemd-driver cgroups are made in the cgroup file system,
// not as systemd units over D-Bus as the kubelet's systemd manager does;
// hugepages, memory QoS (memory.min/high) and cpu manager are left out.
//
// cm needs root (or a delegated cgroup tree). New fails with ErrUnavailable
// where cgroups cannot be written; the caller then runs without pod
// cgroups by leaving cri.Config.PodCgroups nil, as the in-memory runtime
// always does.
//
// Usage:
//
//	rt, err := cri.New(ctx, cri.Config{Endpoint: ep})
//	cgm, err := cm.New(ctx, cm.Config{DriverSource: rt, KubeReserved: reserved})
//	switch {
//	case err == nil:
//		rt.SetPodCgroups(cgm)
//	case errors.Is(err, cm.ErrUnavailable): // run without pod cgroups
//	}
package cm
