// Package sim is a harness for controller tests: a cluster of nodes in one
// process, each a real nodekit agent (podconfig, syncloop, podworkers,
// pleg, status, prober, node heartbeats) on its own in-memory runtime
// (runtime/fake), all against an in-memory API store and on one clock, so
// that an hour of cluster life runs in a fraction of a second and the same
// seed gives the same run.
//
// Where it sits: the Store plays the apiserver. Its clients have the method
// sets of client-go's typed clients (Pods, Nodes, Leases, Events), in
// part; a controller's own client-go or controller-runtime code runs on
// the cluster through the simclient module (github.com/nodekit/nodekit/simclient),
// which serves the Kubernetes REST API over the Store, fed by
// Store.Observe, with every other kind of the API kept beside it. The
// agents list and watch their pods through it, patch statuses, delete pods
// they have stopped, renew their Leases and record their events (Pulled,
// Created, Started, Killing, Unhealthy, rejections such as OutOfcpu,
// DeadlineExceeded ...), and the
// controller under test reads and writes the same Store. The Store assigns UIDs, resourceVersions and
// creationTimestamps, applies the pod defaults nodekit relies on, and
// deletes gracefully: a bound, running pod gets deletionTimestamp and
// deletionGracePeriodSeconds and stays until its agent has stopped it; a
// pod with finalizers stays after that (grace 0) until they are removed.
//
// The Cluster adds what the control plane would. A scheduler: a pod
// without spec.nodeName goes to the Ready node with the fewest pods, once
// every goroutine is idle (the pods created in one instant oldest first,
// then by name, so that concurrent controllers do not change where pods
// go; at once on Config.Clock, where the cluster does not see idleness). The
// node lifecycle controller: a Lease unrenewed for 50s
// (NodeMonitorGracePeriod, kube-controller-manager's default) makes the Node's
// conditions Unknown and its pods not Ready; a Node found Unknown, or
// reporting Ready False, is tainted node.kubernetes.io/unreachable or
// not-ready NoExecute at the next pass (5s), rate-limited per zone and not
// while no Node is Ready, as upstream, and untainted once Ready again. The
// taint eviction controller: a pod on a Node with a NoExecute taint is
// deleted, gracefully as by any client, at once if it does not tolerate the
// taint, after its tolerationSeconds if it does (the Store gives every pod
// the apiserver's 300s tolerations of not-ready and unreachable unless it
// has its own), never if it tolerates it without; a taint gone before then
// cancels the eviction. A pod evicted from a node whose agent is gone stays
// Terminating, as in a cluster, until the agent returns.
// Config.NoScheduler and Config.NoTaintEviction turn those two off.
//
// Nodes: AddNode numbers them from 0, and Config.Node, told a node's name
// and index, sets its NodeOptions: spec.podCIDR (default
// 10.244.<index>.0/24, as the node IPAM controller assigns; the node's
// pods get their IPs from it, so no two pods in the cluster share one),
// its InternalIP (default 172.16.<index/254>.<index%254+1>), labels (a
// zone) and capacity (default 4 CPUs, 16Gi, 100Gi of ephemeral storage).
//
// Node-pressure eviction is off by default. Config.Eviction gives a node
// the kubelet's eviction manager (package eviction) over its Summary API
// (package stats over its runtime, so over the usage the annotations
// below and fake.Runtime.SetUsage script): the node evicts pods (Failed,
// reason Evicted, the kubelet's message), reports MemoryPressure,
// DiskPressure and PIDPressure, and its admission refuses pods under them.
// The scheduler reads those conditions as it reads the NoSchedule taints
// TaintNodesByCondition makes of them: no BestEffort pod goes to a node
// under memory pressure, no pod to one under disk or PID pressure, unless
// it tolerates the taint. A Node shows a pressure with its next status
// (within 10s, as the kubelet's): a pod bound before then is refused.
//
//	cl, _ := sim.New(sim.Config{Seed: 1})
//	defer cl.Close()
//	cl.AddNode("node-a")
//	cl.CreatePod(ctx, pod)                 // or cl.Pods("default").Create(...)
//	cl.RunFor(ctx, time.Hour)              // virtual: well under a second
//	p, _ := cl.Pod("default", pod.Name)    // status as the agent wrote it
//	for _, e := range cl.Events() { ... }  // "00:00:01 Pod default/web phase Running"
//
// Virtual time, two ways. By default the cluster owns a virtual Clock:
// RunFor, RunUntil and Settle wait until no goroutine of the process can
// run (runtime/metrics' scheduler counts), then jump the clock to the next
// timer and fire it, so a test never sleeps; goroutines of the test itself
// (a controller's loops) take part as long as they wait on channels, locks
// or the cluster's Clock, never on real time. Inside a testing/synctest
// bubble, pass Config.Clock: clock.RealClock{} instead; the bubble makes
// real time virtual and time.Sleep(time.Hour) runs the cluster for an hour.
//
// Pods are scripted per pod with annotations (StartDelayAnnotation,
// ExitAnnotation, ReadyAfterAnnotation for any readiness probe,
// PullErrorAnnotation, and CPUAnnotation, MemoryAnnotation and
// DiskAnnotation for the usage the runtime's stats report, growing on
// the clock), per image or container name through
// Node.Runtime().SetImageBehavior, or by any Go func as
// fake.Config.PodBehavior (Config.Runtime). Config.Runtime also sets each
// runtime's seeded fault injection (FailureRates); Node.Stop and
// Node.Start crash and restart an agent with its pods kept (Stop, called
// between runs, lets the instant's work end first, so the agent acts on
// what came before it the same way in every run).
//
// The event log (Cluster.Events) has what changed in the store, seen each
// time the cluster is idle (a pod's phase, readiness, containers,
// deletion; a Node's readiness and taints), and the events the agents and
// the cluster's controllers recorded, with the node of an agent's, but for
// those of readiness probes: as the kubelet's, an agent probes readiness
// at once whenever it stores a status for a container not ready yet (once
// stored, so that the probe finds the container running and a pod is
// Ready in the instant its container started in every run), and how many
// of those probes fail around a container's start is not part of the
// log. The store's Events have them all.
//
// Reproducibility: UIDs, generated names, the agents' jitter and the
// runtimes' faults derive from Config.Seed (a pod's UID from the seed, its
// namespace and name and how many pods of that name were created before;
// a generated name from the seed and how many names were generated with
// that prefix in that namespace, so however many controllers create pods
// in one instant, each gets the same names and UIDs in every run), and
// the event log is kept in a
// stable order (within an instant by object, an object's recorded events
// first and in text order, not in the order they were made), so two runs
// of a scenario give the same log. What concurrent goroutines do in the
// same virtual instant may differ between runs (container IDs, pod IPs,
// which of two pods syncs first, the draws of injected faults, the names
// of Events); the log shows only what a controller could observe once the
// instant is over.
//
// Idleness is read from the Go scheduler's counts (runtime/metrics): no
// goroutine running or runnable but the caller, none created, several
// readings in a row, and no garbage collection cycle under way (a
// goroutine parked to assist the collector counts as blocked, yet goes on
// when the cycle ends). It cannot see work a goroutine does in a system
// call or after a wall-clock timer: the code a cluster runs should do
// neither in the middle of an instant (a controller that logs to stderr
// may write there).
//
// Parallel tests: RunFor waits until every goroutine of the process is
// blocked, so clusters of tests run with t.Parallel wait for each other
// (several times slower each); run them in sequence, or each in a
// testing/synctest bubble (Config.Clock: clock.RealClock{}), whose
// idleness is its own.
//
// Where it differs from a cluster: no admission, validation or defaulting
// beyond the pod fields named above (with DefaultTolerationSeconds' 300s
// tolerations); the scheduler only balances pod counts; the controllers
// read the store itself (no informer lag) and act on what one instant
// changed in name order; a pressure condition shows in the instant the
// eviction manager found it or with the node's next status, as the two
// run in the same instant in either order; the node lifecycle controller sets no NoSchedule
// taints for conditions (the scheduler reads readiness) and records no
// events of its own (NodeNotReady, RegisteredNode); Patch supports the
// status subresource's strategic merge patches only; watches replay the
// last 4096 pod events and answer 410 Gone beyond; Nodes, Leases and
// Events have no watch of their own (simclient's have); Events count an event repeated as client-go's
// recorder does, without its spam filter (a burst of 25 per object, then
// one per 5 minutes) and its merging of similar messages, and hold the
// events nodekit records, the node runtimes' among them (the kubelet's
// runtime manager's: Pulling, Pulled, Failed, BackOff, Created, Started,
// Killing, hook failures, SandboxChanged); pods are on runtime/fake's in-memory network, which the
// agents' httpGet, tcpSocket and grpc probes reach (fake.Runtime.DialPod):
// a pod answers as a healthy server (200, SERVING, a connection) once its
// container runs and its ReadyAfterAnnotation has passed, and refuses
// connections before and once it exited. Beyond one process, the same
// agents, runtimes and annotations (AnnotationBehavior) run against a real
// kube-apiserver, sharded across processes: examples/simnodes.
package sim
