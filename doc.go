// Package nodekit is the kubelet's core taken apart into packages a program
// can import one by one. Read this first; each package's own doc says more.
//
// The data path:
//
//	static files ─┐
//	manifest URL ─┼─► podconfig ──PodUpdate──► syncloop ──► podworkers ──► agent ──► runtime.Runtime
//	apiserver    ─┘                               ▲             │ waits on       │
//	                                              │             ▼                ▼
//	              runtime.Runtime ──relist──► pleg ──► runtime.Cache        status ──► apiserver
//
// The packages:
//
//   - runtime: the contract with whatever runs pods (Runtime, Pod,
//     PodStatus), the pod status Cache, Backoff, ComputePodActions.
//   - runtime/fake: an in-memory Runtime with programmable containers and
//     seeded fault injection, for tests and demos.
//   - runtime/cri: Runtime over the CRI (containerd, CRI-O), with a fake CRI
//     server for tests.
//   - podconfig: merges pods from static files, a manifest URL and the
//     apiserver into one ordered stream of PodUpdates.
//   - pleg: relists the runtime, emits pod lifecycle events, keeps the Cache.
//   - syncloop: the main loop that turns updates, events and ticks into calls
//     on a Handler.
//   - podworkers: one goroutine per pod, the syncing → terminating →
//     terminated state machine, grace periods, requeue.
//   - status: the pod status manager: API status generation, a versioned
//     cache, sync to the apiserver, mirror pods.
//   - prober: liveness, readiness and startup probes (HTTP, TCP, gRPC,
//     exec through runtime.CommandRunner), their results and updates.
//   - agent: the default assembly of all of the above, the easiest place to
//     start.
//   - node: the Node object: registration, node status and conditions as
//     the kubelet reports them, the node Lease, provider hooks; the agent
//     uses it with Config.Node, examples/kubenode joins a real cluster.
//   - podutil: the config.* annotations and static/mirror pod helpers all
//     packages share.
//   - cm: the kubelet's QoS cgroups for pods and node allocatable, for
//     runtime/cri or any runtime on Linux.
//   - dns: the kubelet's pod DNS configuration (dnsPolicy, cluster DNS,
//     host resolv.conf, limits), for runtime/cri or any runtime.
//
// Every external dependency (runtime, apiserver clients, clock, logger) is an
// interface the caller can fill with a fake. The smallest useful assembly is
// agent.New with a node name and runtime/fake's runtime; see
// examples/standalone.
package nodekit
