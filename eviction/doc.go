// Package eviction is the kubelet's node-pressure eviction manager
// (pkg/kubelet/eviction): it watches the node's signals in the Summary
// API, reports MemoryPressure, DiskPressure and PIDPressure, reclaims
// node-level resources and evicts pods, so that the node protects itself
// before the kernel's OOM killer or a full disk does.
//
// Where it sits: a stats provider (the Summary of /stats/summary) feeds
// it through SummaryProvider; the Manager is a node.PressureSource of the
// node controller and an admission.PodAdmitHandler; its hard thresholds
// (Thresholds) are what node.Config.EvictionHard keeps off allocatable; it
// evicts through a PodKiller, the agent's kill path.
// agent.Config.Eviction wires all of it.
//
// # Signals and thresholds
//
// Signals are computed from each summary as the kubelet's
// makeSignalObservations: memory.available (node available against
// available plus working set), allocatableMemory.available (the "pods"
// system container), nodefs.available and nodefs.inodesFree (Node.Fs),
// imagefs.available and imagefs.inodesFree (Runtime.ImageFs),
// containerfs.available and containerfs.inodesFree (Runtime.ContainerFs),
// pid.available (Rlimit: maximum PID minus running processes). A threshold
// is met when its signal falls below its value, a quantity or a percentage
// of the capacity. The kubelet's flags, parsed by ParseMap and
// ParseThresholdConfig:
//
//	-eviction-hard                        memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15% (the default)
//	-eviction-soft                        memory.available<1Gi
//	-eviction-soft-grace-period           memory.available=1m30s (one per soft threshold)
//	-eviction-minimum-reclaim             memory.available=500Mi
//	-eviction-pressure-transition-period  5m (Config.PressureTransitionPeriod)
//	-eviction-max-pod-grace-period        0 (Config.MaxPodGracePeriodSeconds)
//	-kernel-memcg-notification            false (Config.MemoryNotifier: MemcgNotifier)
//
// containerfs thresholds are never configured: as the kubelet's, they are
// nodefs's (one file system, or writable layers apart from images) or
// imagefs's (a dedicated image file system), whatever is given.
//
// # A pass
//
// Every MonitoringInterval (10s) Synchronize, as the kubelet's:
//   - observes the signals and finds the thresholds met, keeping those met
//     before until the signal is MinReclaim above them;
//   - raises the thresholds' conditions, each kept for the pressure
//     transition period after it was last observed;
//   - takes the thresholds met for their grace period whose stats are new
//     since the last pass (the same stats never evict twice), memory
//     first; with none, it is done;
//   - for a disk signal, reclaims node-level resources first (dead
//     containers, then every unused image; which ones by file system, as
//     the kubelet's) and, if a fresh summary shows every threshold clear
//     with its minimum reclaim, evicts nothing;
//   - ranks the active pods as the kubelet's rankMemoryPressure (pods whose
//     working set exceeds their request, then lower priority, then more
//     memory above the request), rankDiskPressureFunc (the same over the
//     file system usage the signal counts: writable layers, logs, local
//     volumes) or rankPIDPressure (lower priority, then more processes),
//     pods without stats first;
//   - evicts the first pod that is not critical (podutil.IsCritical:
//     static, mirror, or priority 2000000000 and up), at most one per
//     pass: status Failed, reason Evicted, the kubelet's message ("The node
//     was low on resource: memory. Threshold quantity: 100Mi, available:
//     50Mi. Container c was using 3Gi, request is 0, has larger
//     consumption of memory. "), a DisruptionTarget condition (reason
//     TerminationByKubelet), grace period 1s for a hard threshold, at most
//     MaxPodGracePeriodSeconds for a soft one; an Evicted event with the
//     kubelet's annotations.
//
// Run then waits for the pod's cleanup (PodCleanedUp, 30s at most) before
// the next pass.
//
// # Admission
//
// Admit refuses, with reason Evicted and "The node had condition:
// [MemoryPressure]. ", BestEffort pods under memory pressure alone unless
// they tolerate node.kubernetes.io/memory-pressure:NoSchedule, and every
// pod under disk or PID pressure; critical pods are admitted.
//
// # Where it is shown
//
// On a real node (agent's TestEvictionUnder*OnContainerd, package stats
// over containerd and the host): a BestEffort pod holding 320Mi takes
// memory.available under a hard threshold set 120Mi below what the node
// had and is evicted with the kubelet's message while a Guaranteed pod
// runs on; a pod writing 400Mi into its writable layer is evicted for a
// soft nodefs.available threshold once its grace period has passed; the
// Node's MemoryPressure and DiskPressure come and go. In sim
// (sim.Config.Eviction, over runtime/fake's scripted usage): a pod whose
// memory grows puts a node under memory pressure on virtual time, its
// BestEffort pods are evicted one per pass, the scheduler keeps new
// BestEffort pods off it, and a controller's replacements run elsewhere.
// docs/reliability.md has the figures.
//
// # Differences from the kubelet
//
//   - A memory notification (MemcgNotifier, cgroup v1's eventfd as the
//     kubelet's; any NotifierFactory) wakes Run's loop rather than running
//     a pass on the notifier's goroutine, so passes never overlap.
//   - Whether the image and container file systems are dedicated is told
//     by DiskInfo or, without, guessed from the first summary (a capacity
//     or inode count other than nodefs's); the kubelet asks cAdvisor and
//     the CRI.
//   - Local storage limits (emptyDir sizeLimit, ephemeral-storage limits
//     of pods and containers: the kubelet's localStorageEviction) are not
//     enforced, and swap is not counted in memory.available.
//   - Pods are ranked by keys computed once per pod, with a stable sort:
//     equal pods keep the ActivePods order (the kubelet's sort is not
//     stable), and PIDs compare without the kubelet's unsigned
//     subtraction.
//   - Conditions in the admission message are in the order memory, disk,
//     PID (the kubelet's is a map's). No eviction metrics.
//   - The container GC reclaim is the runtime's GarbageCollect with the
//     agent's policy; the kubelet's also removes the containers of evicted
//     pods not yet deleted (evictNonDeletedPods).
package eviction
