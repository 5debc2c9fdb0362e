// Package runtime is the contract between a node agent and whatever runs its
// pods: a CRI runtime (see runtime/cri), a virtual-kubelet style provider that
// is not CRI at all (see examples/provider), or the in-memory fake in
// runtime/fake.
//
// The contract is the Runtime interface: seven methods that list running pods,
// inspect one pod, bring a pod to its spec (SyncPod) and stop it (KillPod).
// Optional capabilities (garbage collection, an image service, a stream of
// container events, killing one container of a running pod (ContainerKiller), pod and node stats: PodStatsLister, NodeStatser) are
// separate small interfaces that callers detect with a
// type assertion, so a provider implements only what it can.
//
// Besides the contract the package holds the pieces every runtime and every
// consumer of runtime status share:
//
//   - Cache, the pod status cache that the PLEG writes and pod workers read
//     with GetNewerThan, so a worker never acts on status older than its last
//     update;
//   - Backoff, the per-key exponential back-off behind CrashLoopBackOff and
//     ImagePullBackOff, and CrashLoopBackOff, the check SyncPod makes
//     before it starts a container again;
//   - ComputePodActions, the runtime-neutral plan of what SyncPod must do
//     (which sandbox to create, which containers to start or kill);
//   - HashContainer, the container spec hash a runtime stores with each
//     container so a changed spec restarts it;
//   - the kubelet's runtime-manager events: their reasons (EventPulled,
//     EventKilling, ...), ContainerRef (the spec.containers{c} reference
//     they are recorded on), RecordEvent, EventSource (a runtime that
//     records them itself) and WithKillMessage (the Killing event's
//     message of a caller's kill).
//
// Lifecycle hooks (postStart, preStop) run through package
// runtime/lifecycle, which runtime/cri and runtime/fake share.
//
// A backend that finishes starting a container after SyncPod returned (a
// cloud API, a VM) reports it meanwhile as created with reason
// ReasonContainerCreating, so ComputePodActions does not start it twice;
// see that constant. A backend that runs whole pods rather than containers
// (a virtual-kubelet provider) is better served by package provider, which
// turns virtual-kubelet's pod-level interfaces into a Runtime that owns its
// pods' status (StatusOwner).
//
// Where it sits: podconfig -> syncloop -> podworkers -> agent -> Runtime, with
// pleg relisting the Runtime into the Cache.
//
// A complete Runtime of a few hundred lines, processes instead of
// containers, is examples/provider/procruntime: GetPods and GetPodStatus
// from its own state, SyncPod doing what ComputePodActions asks and
// recording each step in the PodSyncResult, KillPod with
// EffectiveGracePeriod; runtime/fake is the in-memory one, with an Example.
package runtime
