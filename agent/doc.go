// Package agent is nodekit's default assembly: a node agent that works like
// the kubelet's core, built from the other packages.
//
// It wires podconfig (static files, a manifest URL, the apiserver, and any
// source of the caller's, fed through Channel or, without a goroutine of
// the agent's, Send) into syncloop, which runs in Run's goroutine and
// dispatches to podworkers; the
// agent implements the sync loop's Handler and the pod workers' PodSyncer:
// admission of new pods, SyncPod (generate and set the API status, then call
// the runtime), SyncTerminatingPod (kill with the effective grace period and
// record the final status), SyncTerminatedPod (cleanup) and housekeeping
// (kill runtime pods no source wants, forget finished workers, drop orphaned
// statuses). pleg keeps the shared runtime.Cache by relisting every
// RelistPeriod, as the kubelet by default; with EventedPLEG, from the
// runtime's container event stream when it has one
// (runtime.ContainerEventer: containerd 2.x, runtime/fake), relisting every
// RelistPeriod (at most 2s) all the same, since a CRI runtime may drop
// events and only a relist declares the cache current (the kubelet relists
// every 5 minutes and has kubernetes/kubernetes#123087 for it; a status
// owner, whose stream drops nothing, relists every StreamingRelistPeriod).
// Without a stream and with Config.RelistOnRequest (off by default, for
// the kubelet's timing), the agent asks the PLEG for a relist at once
// (pleg.GenericPLEG.RequestRelist) after it starts containers and when a
// pod worker waits for status newer than its last sync (through
// runtime.NewCacheWithOnWait), so a pod's Running status and a deleted
// pod's kill do not wait out the relist period as the kubelet's do. status keeps the API statuses and, when a client is
// configured, syncs them and the mirror pods of static pods to the
// apiserver.
//
// Garbage is collected as by the kubelet: dead containers every minute
// beyond the kubelet's policy (ContainerGCPeriod, ContainerGCPolicy), with
// the pod workers as the policy's PodState: a pod that finished keeps its
// newest dead containers and their logs until it is deleted or evicted; and
// unused images every 5 minutes once the image filesystem is 85 % full,
// down to 80 % (ImageGCPeriod and thresholds); a negative period turns
// either off.
//
// The agent runs the pods' probes with package prober: readiness and
// startup verdicts become the containers' Ready and Started (and so the
// ContainersReady and Ready conditions, with readiness gates); a container
// (or sidecar) that fails its liveness or startup probe is killed alone
// (runtime.ContainerKiller if the runtime has it, else KillPod with that
// container only; its sandbox and the pod's other containers stay) with the
// kubelet's Killing event (recorded by the runtime, with the probe's
// message, when the runtime records events: runtime.EventSource), and its
// restart policy and back-off decide what follows. A pod that cannot be
// killed gets a FailedKillPod event. Exec probes need a runtime that implements
// runtime.CommandRunner.
//
// A container that exits while its crash-loop back-off holds it back is
// shown waiting with reason CrashLoopBackOff by the sync that finds the
// exit (status.GenerateOptions.BackOff), and the pod is due again exactly
// when the back-off ends (podworkers.RetryAfter), not every
// TransientBackOff: each sync in between would record one more BackOff
// event, an apiserver write. The kubelet (v1.37) retries at the back-off's
// end plus up to 50 % jitter and shows CrashLoopBackOff from its next
// sync, often the restart's. An image pull refused in back-off is alike:
// the pod is due when the pull may be tried again (the runtimes return
// runtime.BackOffError), where the kubelet waits for its next resync, up
// to a minute; a runtime whose refusal does not say when its back-off
// ends is asked again after TransientBackOff. A failure other than a
// back-off in the same sync keeps SyncErrorBackOff.
//
// As the kubelet, the agent fails a pod past its spec.activeDeadlineSeconds
// (reason DeadlineExceeded) at the first sync tick after the deadline and
// kills it, and passes the pod's image pull secrets, read through
// Config.Secrets, to the runtime (FailedToRetrieveImagePullSecret when one
// cannot be read). Privileged and host-namespace pods are admitted unless
// Config.DenyPrivileged or DenyHostNamespaces say otherwise.
//
// With Config.Node the agent also registers the Node and keeps its status
// and Lease (package node): MaxPods is the pods capacity, Ready follows the
// runtime's status and the PLEG's health, mirror pods are owned by the
// registered Node, and pods are admitted against the Node's allocatable,
// labels and taints (admission.GeneralPredicatesWithPreemption): before
// the Node is registered, against the Node the agent would register, as
// the kubelet checks against its initial node, so a pod neither waits for
// the apiserver nor goes unchecked; a critical pod short only of resources
// preempts other pods, as the kubelet's. Without Config.Node (standalone)
// these checks are not made.
//
// Everything but the node name and the runtime has a default; every part can
// be replaced through Config. Without an apiserver client the agent runs
// standalone, as the kubelet does with only static pods. ExampleNew runs one
// pod on the in-memory runtime (runtime/fake).
//
// Admission is an ordered list of handlers (Config.AdmitHandlers, package
// admission) with the kubelet's shape; the built-in checks (MaxPods, host
// namespaces, privileged, sysctls: the kernel's safe ones and
// Config.AllowedUnsafeSysctls, reason SysctlForbidden) are
// DefaultAdmitHandlers, to which a custom check
// is appended. An agent assembled by hand from the same parts (podconfig,
// podmanager, pleg, podworkers, status, syncloop, admission) needs no code
// of this package: see custom_test.go, and podworkers.PodSyncer for what a
// syncer must do.
//
// Config.Eviction runs the kubelet's eviction manager (package eviction)
// over a stats provider's Summary: it is the Node's pressure source, takes
// its hard thresholds off allocatable, refuses pods under pressure (first
// of the admit handlers) and evicts one pod at a time through the kill
// path of critical pod preemption, with reason Evicted.
//
// RunOnce is the kubelet's --runonce instead of Run: it runs the pods of the
// static sources once until each runs or has completed, reports per pod and
// returns, leaving the pods as they are.
//
// Pods returns what the agent runs with the statuses it generated, for a
// live view or a test's assertions.
//
// Where the agent (or a part it assembles) knowingly differs from the
// kubelet is listed, with the reasons, in the module's package doc
// (github.com/nodekit/nodekit), under "Deliberate differences from the
// kubelet".
//
// Config.Registerer turns on the kubelet's metrics of the PLEG, the pod
// workers and the agent itself (pods and containers started, pod start
// durations) under the kubelet's names; nothing is registered without it.
package agent
