// Package provider runs a virtual-kubelet provider on nodekit's agent,
// unchanged: it turns a pod-level provider into a runtime.Runtime.
//
// A virtual-kubelet provider implements PodLifecycleHandler (CreatePod,
// UpdatePod, DeletePod, GetPod, GetPodStatus, GetPods), optionally
// PodNotifier (NotifyPods) and, for its node, NodeProvider (Ping,
// NotifyNodeStatus). The interfaces here have exactly virtual-kubelet's
// method sets and k8s.io/api types only, so a value that satisfies
// virtual-kubelet's satisfies these, with no import and no wrapper. Runtime
// (New) adapts one to the container-level contract the agent drives:
//
//   - SyncPod calls CreatePod for a pod the provider does not have and
//     UpdatePod when a field virtual-kubelet passes on changed; KillPod calls
//     DeletePod with the pod's grace period and waits, within it, for the
//     provider to report the pod stopped. Failures become events
//     (ProviderCreateFailed, ...), the pod's status (reason ProviderFailed)
//     and sync errors that the agent retries with a back-off growing per pod.
//   - The provider owns the pod's status, as under virtual-kubelet: Runtime
//     is a runtime.StatusOwner, so what the provider reports is what the
//     agent's status manager sends, apart from what the kubelet always sets
//     (QoS class, start time, host IPs when missing, the transition times of
//     its conditions, observed generation, and, once the phase is Succeeded
//     or Failed, Ready and ContainersReady False with reason PodCompleted or
//     PodFailed, whatever the provider says: a finished pod is not ready),
//     and the agent runs no probes for these pods.
//   - Status changes reach the pipeline as container events carrying the new
//     status: from NotifyPods at once (registered when the agent opens the
//     event stream, before the provider is asked anything: SyncPod and
//     KillPod wait for it, so a provider may call its callback from
//     CreatePod without a nil check, as virtual-kubelet's mock does), or for a provider without it from a
//     poll of GetPodStatus every PollPeriod. The agent streams them with the
//     evented PLEG; relisting (GetPods from memory) is only the safety net.
//     A pod's first status write waits for CreatePod and carries what the
//     provider reports by then (Running for an instant provider: one write
//     to Running, as virtual-kubelet's), and a notification reaches the
//     next sync without waiting for a relist or a cache period.
//   - Stats: a provider's optional GetStatsSummary and GetMetricsResource
//     (virtual-kubelet's /stats/summary and /metrics/resource handlers)
//     are Runtime's GetStatsSummary and GetMetricsResource, which the
//     kubelet API (package server: Config.Stats, Config.ResourceMetrics)
//     serves; virtual-kubelet's own copy of the Summary type is converted
//     through its JSON, and without GetMetricsResource the resource
//     metrics are derived from the summary (package stats).
//   - Logs, exec, attach and port-forward: a provider's optional
//     ContainerLogsProvider, ContainerExecProvider, ContainerAttachProvider
//     and PortForwardProvider are Runtime's runtime.ContainerLogs,
//     runtime.ContainerStreamer and runtime.PortForwarder, which the
//     kubelet API serves (give server.Config's Logs, Streaming and
//     PortForward what Runtime.KubeletAPI returns: nil for what the
//     provider lacks, whose endpoint is then not served, 404). The
//     container is named from the ID the server passes (the provider's own
//     container IDs, or the ones Runtime made up); log options are passed
//     on as they are, for the provider to apply, and exec's exit code
//     error (ExitStatus() int) through. PortForward is virtual-kubelet's as
//     it is; the other three are over nodekit's types (virtual-kubelet's
//     name its own types, so its methods cannot match) and take one line
//     each in a virtual-kubelet provider: package vkadapt of nodekit's e2e
//     module converts (README, "Coming from virtual-kubelet").
//   - The NodeProvider is not this package's: give it to
//     agent.Config.Node.Provider (package node), where a failing Ping makes
//     the node NotReady and NotifyNodeStatus sends a status at once.
//
// Where it sits: podconfig -> syncloop -> podworkers -> agent -> Runtime ->
// PodLifecycleHandler, with the Runtime's events feeding the PLEG.
//
// Usage (p is a virtual-kubelet provider):
//
//	rt, err := provider.New(provider.Config{Provider: p, Recorder: recorder})
//	if err != nil { ... }
//	a, err := agent.New(agent.Config{
//		NodeName:     "vk-1",
//		Runtime:      rt,
//		PodSource:    clientset.CoreV1().Pods(""),
//		StatusClient: func(ns string) status.PodClient { return clientset.CoreV1().Pods(ns) },
//		Node: &node.Config{Nodes: clientset.CoreV1().Nodes(), Provider: p,
//			// Without Leases the Node status goes out every 10s.
//			Leases: clientset.CoordinationV1().Leases(v1.NamespaceNodeLease)},
//	})
//	if err != nil { ... }
//	err = a.Run(ctx)
//
// Package provider/nodeutil does all of the above in one call, as
// virtual-kubelet's nodeutil.NewNode: agent, Node, Lease and kubelet API
// for a provider and its node template.
//
// Admission: the agent checks pods against the Node as the kubelet does,
// its pods capacity and resources included, and a pod bound past them
// fails (OutOfpods, OutOfcpu ...) for good. virtual-kubelet never refuses a
// pod for its provider's capacity; agent.Config.IgnoreCapacity does the
// same (nodeutil's default), leaving the provider's CreatePod to refuse.
//
// Differences from virtual-kubelet's PodController, on purpose: the agent
// keeps the kubelet's guarantees, so a pod is deleted from the apiserver
// only once the provider reported it stopped or gone (virtual-kubelet
// force-deletes it when the grace period ends), and the pod's status before
// the provider's first report is the one the pod already has (Pending). Environment
// variables are not resolved before CreatePod (virtual-kubelet resolves
// configMap, secret and field references unless told not to): a provider
// that needs them resolved uses package podenv. providertest has
// virtual-kubelet-style mock providers.
package provider
