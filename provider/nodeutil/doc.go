// Package nodeutil sets up a virtual node for a virtual-kubelet provider in
// one call, as virtual-kubelet's nodeutil.NewNode: NewNode wires the
// provider runtime (package provider), the agent (its pods from the
// apiserver, their statuses back), the Node and its Lease (package node)
// and the kubelet API (package server), and Node.Run runs them.
//
// The Node registered is the template's (WithTemplate; virtual-kubelet's
// NodeSpec once the provider's ConfigureNode filled it; DefaultTemplate
// otherwise): labels, annotations, taints, providerID, capacity,
// allocatable, addresses, daemon endpoints, nodeInfo, phase and
// conditions. It is a virtual node (node.Config.Virtual): the host's
// capacity, addresses, kernel, OS image and machine ID are never read or
// reported. Ready is nodekit's, from the node provider's Ping and the
// agent's health; a NodeProvider's NotifyNodeStatus pushes are applied as
// virtual-kubelet applies them (node.Provider says which fields).
//
// Defaults, and how they differ from virtual-kubelet's:
//   - Pods are admitted whatever the capacity, as virtual-kubelet does
//     (agent.Config.IgnoreCapacity); WithEnforceCapacity gives the
//     kubelet's checks.
//   - No kubelet API is served unless WithServer says where (virtual-
//     kubelet listens on :10250); Handler serves it for a server of one's
//     own. With TLS and server.Auth it is the kubelet's secured port.
//   - One pod worker per pod (the kubelet's) rather than a worker count;
//     StatusSyncWorkers (8) bounds the status writes in flight. A
//     client-go client's own rate limit (QPS 5, burst 10 by default)
//     bounds them too: raise it for a node that starts many pods at once.
//   - A pod status is written with an update (PUT) of pods/status on
//     the resourceVersion the node last saw, as virtual-kubelet writes it,
//     not with the kubelet's strategic-merge patch, which costs the
//     apiserver more CPU per write; a stale resourceVersion answers
//     Conflict and the pod is then read and patched. WithPatchStatus
//     patches always, as the kubelet.
//   - Pods come from a watch of the pods bound to the node
//     (Clients.Pods); WithPodFilter is virtual-kubelet's
//     PodEventFilterFunc. A shared informer of one's own is fed through
//     agent.Config.Sources and Agent.Channel (WithAgentConfig).
//   - WithNodeStatusUpdateErrorHandler is virtual-kubelet's.
//
// Porting from virtual-kubelet: where a program did
//
//	node, err := nodeutil.NewNode(name, func(pc nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
//		p, err := mock.NewMockProvider(cfgPath, name, "linux", ip, port)
//		p.ConfigureNode(ctx, pc.Node)
//		return p, nil, err
//	}, nodeutil.WithClient(cs))
//
// it does
//
//	p, err := mock.NewMockProvider(cfgPath, name, "linux", ip, port)
//	tmpl := nodeutil.DefaultTemplate(name)
//	p.ConfigureNode(ctx, tmpl)
//	n, err := nodeutil.NewNode(name, p, nodeutil.WithTemplate(tmpl), nodeutil.WithClients(nodeutil.Clients{
//		Pods:      cs.CoreV1().Pods(""),
//		PodStatus: func(ns string) status.PodClient { return cs.CoreV1().Pods(ns) },
//		Nodes:     cs.CoreV1().Nodes(),
//		Leases:    cs.CoordinationV1().Leases(v1.NamespaceNodeLease),
//	}))
//	err = n.Run(ctx)
//
// The package imports no client-go: the clients are the small interfaces
// of the packages it wires, which client-go's typed clients satisfy.
package nodeutil
