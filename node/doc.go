// Package node keeps one node's Node object and Lease in the apiserver, as
// the kubelet's node status code (pkg/kubelet/kubelet_node_status.go,
// pkg/kubelet/nodestatus) and its node lease controller do.
//
// A Controller registers the Node (creating it with the kubelet's labels,
// taints, capacity, allocatable, addresses, daemon endpoint and nodeInfo,
// or reconciling the labels it owns on a Node that exists), then computes
// the status every UpdateFrequency (10s) and sends it only when it changed
// or ReportFrequency (5m) passed, the kubelet's rule with leases, as a
// strategic merge patch of the status subresource where the NodeClient is
// a NodePatcher too (client-go's is; the kubelet's PatchNodeStatus), else
// with UpdateStatus; as the kubelet's, an update is tried up to five times
// in a row, whatever fails, each retry from the Node read again from
// storage, then waits for the next computation. Its conditions are the
// kubelet's: MemoryPressure, DiskPressure, PIDPressure
// (from an optional PressureSource) and Ready, last, with reason
// KubeletReady or KubeletNotReady and the kubelet's messages for a runtime
// or network that is not ready, a runtime that has not answered ready for
// RuntimeDownAfter (30s; a failed Status call leaves the last answer
// standing, as the kubelet's runtime state) and failed health checks (the
// PLEG's). lastTransitionTime moves only when a
// condition's status does. Another goroutine renews the Lease in
// kube-node-lease every RenewInterval (10s, a quarter of its 40s duration),
// owned by the Node, recreated when deleted; as the kubelet's lease
// controller, a failed renewal is retried at once, up to five attempts
// (reading the Lease again after a conflict), then from the Lease read
// again, five more, before the next interval; failed reads back off from
// 200ms doubling to 7s. Idle, a node costs the apiserver 360 lease updates
// and 12 status updates an hour, and its Node's watch (without a watch,
// 360 reads of the Node, as the kubelet's).
//
// Capacity and nodeInfo come from a MachineInfo read at every
// computation (HostMachine by default, as the kubelet reads cadvisor's
// machine info; Machine and FakeMachine for simulations and tests), the
// pods capacity from MaxPods and PodsPerCore; allocatable is the capacity
// minus SystemReserved, KubeReserved and the EvictionHard thresholds
// (memory.available off memory, nodefs.available off ephemeral-storage,
// percentages of the capacity), never below zero, as the kubelet's node
// allocatable.
//
// Where it sits: beside the pod path. The agent (or any program) gives it
// the runtime, the PLEG's health and MaxPods; it talks to the apiserver
// through NodeClient and LeaseClient, which client-go's
// CoreV1().Nodes() and CoordinationV1().Leases("kube-node-lease") satisfy.
// A virtual-kubelet style provider plugs in as a Provider (Ping,
// NotifyNodeStatus, whose node is applied field by field as
// virtual-kubelet applies it); Config.Virtual keeps the host's capacity,
// addresses and nodeInfo off a node that is not this host, and
// Config.NodeInfo, ProviderID, Annotations and Phase set what such a node
// reports (package provider/nodeutil fills them from a provider's node
// template); Setters adjust every computed status (allocatable after
// reservations, for one). A Controller also answers Get for its own Node,
// so status.Manager can take it as its Nodes for mirror pods' owner
// references without another request, and InitialNode builds the Node it
// would register, which admission checks pods against until the Node is
// registered (the kubelet's initialNode). node/nodetest has a fake
// apiserver for both clients.
//
//	ctl, err := node.New(node.Config{
//		NodeName: "node-1",
//		Nodes:    clientset.CoreV1().Nodes(),
//		Leases:   clientset.CoordinationV1().Leases(v1.NamespaceNodeLease),
//		Runtime:  rt,
//		HealthChecks: []node.HealthCheck{{Name: "PLEG", Check: p.Healthy}},
//	})
//	if err != nil { ... }
//	err = ctl.Run(ctx) // until ctx ends, or the apiserver refuses the Node
//
// As the kubelet's node informer, the controller watches its Node once it
// is registered, if its NodeClient is a NodeWatcher too (client-go's is):
// a list, then a watch from the list's resource version, field selector
// metadata.name; a watch the apiserver ends is resumed from the last
// resource version seen, and after an error (410 Gone, a failed call, a
// watch ended at once) the Node is listed again after a back-off from
// 800ms doubling to 30s, as client-go's reflector does. So SharedNode, and
// admission with it, has what others change of the Node (labels, taints,
// extended resources) within moments. A Node deleted is forgotten at once
// (admission checks against InitialNode, as the kubelet against its
// initial node) and, as with the kubelet, not registered again until the
// agent restarts (Config.RegisterAgain registers it at the next status
// computation); a Node someone else creates again gets its status kept.
// Each status update puts back a removed kubernetes.io/os or
// kubernetes.io/arch label, as the kubelet's. With a NodeClient that
// cannot watch, each status computation reads the Node from the
// apiserver's cache (resourceVersion "0") first, as the kubelet's does
// (it has its informer too), so SharedNode has others' changes within
// UpdateFrequency. Images are listed from a runtime.ImageService at most
// every ImageRefreshPeriod (30s), cached between, as the kubelet's image
// manager caches them.
package node
