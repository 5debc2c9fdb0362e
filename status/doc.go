// Package status is the agent's pod status manager and status generator,
// the kubelet's pkg/kubelet/status taken out on its own.
//
// It owns the API status of every pod the agent runs. GeneratePodStatus turns
// a pod and the runtime's view of it (runtime.PodStatus) into a v1.PodStatus
// as the kubelet computes it: phase, the agent's conditions, container
// statuses with waiting reasons from a ReasonCache, IPs. The Manager caches
// the latest status of each pod with a version that only grows and syncs
// changes to the apiserver: one status patch (with the pod's UID as
// precondition) per real change, none for a no-op. It also deletes finished
// pods from the apiserver once nothing can run, and keeps mirror pods of
// static pods.
//
// Where it sits: podworkers -> agent (SyncPod on the runtime, then
// GeneratePodStatus and Manager.SetPodStatus) -> Manager -> apiserver. The
// apiserver is reached through PodClient, which client-go's typed
// CoreV1().Pods(namespace) satisfies; without one the Manager serves
// statuses and sends nothing. status/statustest has a fake.
//
// Guards, as in the kubelet: a terminal phase is never left; a container
// that terminated for good (restart policy Never, or OnFailure after
// success) never runs again in the reported status; termination messages
// share 12 KiB per pod; times are kept to whole seconds as the apiserver
// stores them; conditions owned by others are never overwritten. Unlike the
// kubelet there is no informer: the periodic reconcile resends what the
// apiserver has not acknowledged, retries deletions and checks (recreating
// if need be) mirror pods, but does not notice a status someone else changed
// until the agent's next change of it.
//
// Usage, in the agent:
//
//	reasons := status.NewReasonCache()
//	sm, err := status.NewManager(status.Config{
//		PodClient:      func(ns string) status.PodClient { return clientset.CoreV1().Pods(ns) },
//		NodeName:       nodeName,
//		Nodes:          clientset.CoreV1().Nodes(),
//		DeletionSafety: podWorkers,
//	})
//	go sm.Start(ctx)
//
//	// in the pod's sync, after each SyncPod:
//	result := rt.SyncPod(ctx, pod, podStatus, secrets, backoff)
//	reasons.Update(pod.UID, result)
//	var old *v1.PodStatus
//	if s, ok := sm.GetPodStatus(pod.UID); ok {
//		old = &s
//	}
//	sm.SetPodStatus(pod, status.GeneratePodStatus(pod, podStatus, old,
//		status.GenerateOptions{Reasons: reasons, HostIPs: nodeIPs}))
//
//	// when the pod's containers are all stopped for good:
//	sm.TerminatePod(pod)
//	// in housekeeping, with the UIDs of the pods still known:
//	sm.RemoveOrphanedStatuses(known)
package status
