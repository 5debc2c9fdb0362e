// Package status is the agent's pod status manager and status generator,
// the kubelet's pkg/kubelet/status taken out on its own.
//
// It owns the API status of every pod the agent runs. GeneratePodStatus turns
// a pod and the runtime's view of it (runtime.PodStatus) into a v1.PodStatus
// as the kubelet computes it: phase, the agent's conditions, container
// statuses with waiting reasons from a ReasonCache (and CrashLoopBackOff
// from the runtime's back-off for an exit it holds back, before any sync
// has recorded the refusal: GenerateOptions.BackOff), IPs. The Manager caches
// the latest status of each pod with a version that only grows and syncs
// changes to the apiserver: one status patch (with the pod's UID as
// precondition) per real change, none for a no-op. Unlike the kubelet, which
// reads the pod before every patch, it reads only where the apiserver's
// current pod decides something (static pods, terminal and deleted pods,
// after a failed patch); a running pod's patch builds on the answer to its
// previous one or, for its first, on the pod as the apiserver delivered it.
// With Config.UpdateKnownStatus (provider/nodeutil sets it) such a write is
// an update (PUT) of the status subresource on that base's resourceVersion,
// sending what the patch would make of the pod, which costs the apiserver
// less CPU than a strategic merge; a stale base answers Conflict and the pod
// is read and patched. It syncs
// Config.SyncWorkers pods at once (the kubelet one), each as soon as its
// status changes and a worker is free, in the order they changed: no pod
// waits for a batch of others or for a pass over all pods, and one pod is
// never synced twice at once (a change during its sync is sent after it). It also deletes finished
// pods from the apiserver once nothing can run, and keeps mirror pods of
// static pods.
//
// Where it sits: podworkers -> agent (SyncPod on the runtime, then
// GeneratePodStatus and Manager.SetPodStatus) -> Manager -> apiserver. The
// apiserver is reached through PodClient, which client-go's typed
// CoreV1().Pods(namespace) satisfies; without one the Manager serves
// statuses and sends nothing. status/statustest has a fake.
//
// Phase and guards follow the kubelet with ContainerRestartRules (on by
// default since v1.35): whether a stopped container is started again is
// podutil.ContainerShouldRestart (its restartPolicyRules, its own
// restartPolicy, then the pod's), so a container with restartPolicy Never
// under a pod's Always ends the pod, one with Always under Never keeps it
// Running. Guards, as in the kubelet: a terminal phase is never left; a
// container that terminated for good never runs again in the reported
// status (not checked under a pod's restartPolicy Always); termination messages
// share 12 KiB per pod; times are kept to whole seconds as the apiserver
// stores them; conditions owned by others are never overwritten. Ready is
// True only when the containers are and every spec.readinessGates condition
// (set by controllers) is True; NeedToReconcilePodReadiness tells the agent
// that a pod whose gates changed in the apiserver must be synced again, as
// the kubelet's HandlePodReconcile does. Unlike the
// kubelet there is no informer: the periodic reconcile resends what the
// apiserver has not acknowledged, retries deletions and checks (recreating
// if need be) mirror pods, but does not notice a status someone else changed
// until the agent's next change of it.
//
// Usage: ExampleNewManager runs a pod's status from the runtime's view to
// the apiserver (a fake here; client-go's CoreV1().Pods(ns) in production).
// In an agent, the pod's sync sets the status after each runtime step
// (ReasonCache.Update with the step's result, then GeneratePodStatus with the
// status the Manager holds, then SetPodStatus), calls TerminatePod once the
// pod's containers are stopped for good, and housekeeping calls
// RemoveOrphanedStatuses with the UIDs still known. Config.DeletionSafety
// takes the pod workers through DeletionSafetyFunc; see its Example.
package status
