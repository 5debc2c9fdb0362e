// Command simnodes runs a shard of simulated nodes against a real
// kube-apiserver: each node is a full nodekit agent (pod workers, PLEG,
// status manager, probes, node status and Lease) on its own in-memory
// runtime (runtime/fake), its pods scripted by sim's annotations
// (sim.nodekit.io/start-delay, exit, ready-after, pull-error ...), its
// probes answered by the runtime's in-memory network. It is what kwok
// is, with the kubelet's behaviour: restart back-off, probes, graceful
// termination, admission, a Lease that stops when the process does.
//
//	go run ./examples/simnodes -kubeconfig kc -nodes 1000 -shard 0/4
//
// Nodes are named and sharded deterministically: -nodes N names
// <prefix>0000 ... <prefix>N-1 (zero-padded to N's width) and -shard i/n
// runs the i-th of n contiguous blocks of them, so n processes with the
// same flags and i = 0..n-1 run each node once; -processes n starts those
// n processes of this program on one machine and passes a signal on to
// them (a shard that fails stops the others). Node k gets the k-th
// -node-cidr-size block of -pod-cidr as its spec.podCIDR (its pods' IPs
// come from it) and the k-th host address of -node-ip-cidr as its
// InternalIP, so the shards' nodes never overlap.
//
// What a process shares among its nodes, to keep a node cheap: two
// clients, one for pods, events and the informers and one for the nodes'
// Leases and Node status, so that a rollout's patches cannot delay the
// heartbeats (each its own connection pool and rate limiter: -qps,
// -burst; at most -max-in-flight requests open, watches aside, beyond
// which Go's HTTP/2 transport would dial a TLS connection per waiting
// request; client-go's generic typed client over a scheme of core/v1
// and coordination/v1 only, client.go, so that the binary links two API
// groups and not the clientset's 55), one pod
// informer (every bound pod, watched once and dispatched to the node it
// is bound to, rather than a watch per node), one Node informer (which
// answers the node controllers' reads of their Node from the apiserver's
// cache, instead of a GET per node every 10s), an event broadcaster per 16
// nodes (one posts its events one at a time: shared by a thousand nodes it
// falls minutes behind a rollout), and
// the real clock. Per node remain the agent's goroutines (7 when idle,
// agent.BenchmarkIdleAgents; a node's feeder of pod updates runs only
// while it has some, and hands them over with the agent's Send, in its
// own goroutine, so the agent needs no forwarder of its own) and its Lease
// renewal (every 10s), status updates (on change, or every 5m), and the pod
// status patches: one per pod started, its Running status, since a pod's
// first sync holds back its Pending status for up to -first-status-delay
// (1s) while the in-memory runtime starts it (the kubelet writes Pending
// first, then Running; 0 restores that; a start programmed to take longer
// reports Pending when the delay ends). A node's
// PLEG buffers -pleg-event-capacity events (64, not the kubelet's 1000,
// whose buffer would be most of an idle node's heap) and its runtime
// keeps no call list. -gc-percent (Go's GOGC) is 25 by default, not Go's
// 100: the heap may grow a quarter over the live one before a
// collection, which at 1,000 nodes with 2 pods each took the peak from
// 0.29 to 0.21 MiB a node for 0.033 to 0.051–0.056 CPU-seconds a node over the
// run (docs/performance.md); -gc-percent 100 gives the CPU back.
// -memory-limit sets a soft limit instead (Go's GOMEMLIMIT). -pprof-addr serves
// net/http/pprof, for heap and goroutine profiles of a running shard.
//
// SIGINT or SIGTERM stops the process, leaving its Nodes and pods in the
// apiserver as a crashed kubelet would: the Leases go stale and the node
// lifecycle controller marks the Nodes NotReady, then evicts their pods.
package main
