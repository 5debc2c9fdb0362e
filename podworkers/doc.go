// Package podworkers owns the per-pod workers of a node agent: a worker per
// pod UID that applies the latest update of its pod through a PodSyncer and
// walks the pod through a one-way lifecycle, as the kubelet's pod workers
// do. Unlike the kubelet's, a worker is a goroutine only while its pod has
// work: once no update is pending its goroutine takes the next pod waiting
// for one, or exits, and UpdatePod queues the pod again. An idle pod costs
// no goroutine and no stack (a node of many quiet pods, or a simulation of
// thousands of nodes, holds none), and a burst of pods whose syncs are
// quick runs on a few goroutines; pods whose syncs block get one each.
//
// Where it sits: the sync loop (package syncloop) turns config updates, PLEG
// events and resync ticks into UpdatePod calls; each worker waits until the
// runtime.Cache holds status newer than its previous sync (GetNewerThan),
// then calls the PodSyncer (the agent), which drives the runtime and the
// status manager.
//
// The lifecycle:
//
//	syncing ──► terminating ──► terminated ──► finished ──(SyncKnownPods)──► forgotten
//	SyncPod     SyncTerminatingPod  SyncTerminatedPod
//
// A pod moves to terminating on a deletion timestamp, a terminal phase
// (Succeeded or Failed, or SyncPod returning true), a SyncPodKill, as an
// orphaned runtime pod, or when SyncKnownPods no longer finds it desired. It
// never goes back: a SyncPodCreate for a terminating UID marks a restart,
// which happens only after SyncKnownPods has forgotten the finished UID. The
// grace period is the pod's deletion grace period or the kill's override if
// shorter, else the spec's; 0 becomes 1; it only shrinks, and shrinking
// cancels the SyncTerminatingPod in flight so the shorter one takes over.
//
// Static pods of the same full name (name_namespace) never run at once: a
// later one waits, in the order UpdatePod saw them, until the earlier one has
// terminated; a waiting pod killed or forgotten meanwhile leaves the line.
//
// After each sync the pod is put in the ResyncQueue: after ResyncInterval (plus
// jitter) on success, BackOff on error, TransientBackOff on an error wrapping
// ErrTransient, exactly d (without jitter, at most ResyncInterval) after
// an error made by RetryAfter(err, d) (the agent's when only crash-loop
// back-offs held the sync back: the pod is due when the first ends, as the
// kubelet's BackoffError, whose jitter it drops), at once on a state
// change. The sync loop drains due pods from the Queue on its sync tick
// and syncs them again; an update or a PLEG event syncs a pod at once
// whenever it is due.
//
// Given a prometheus.Registerer (Config.Registerer), the workers keep the
// kubelet's kubelet_pod_worker_duration_seconds{operation_type} (from an
// update's StartTime to the end of the sync that realized it) and
// kubelet_restarted_pods_total{static}; without one, no metrics.
//
// Usage: ExampleNew runs one pod through the workers with a PodSyncer of
// the caller's (see PodSyncer for what one must do); in an agent the Queue
// is also the sync loop's syncloop.Config.DuePods, the Cache is the one the PLEG
// writes, and housekeeping calls SyncKnownPods with the desired pods.
//
// Package podworkerstest has a recording PodSyncer for tests.
package podworkers
