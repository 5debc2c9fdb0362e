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
//   - podworkers: a worker per pod (a goroutine while it has work), the
//     syncing → terminating → terminated state machine, grace periods,
//     requeue.
//   - status: the pod status manager: API status generation, a versioned
//     cache, sync to the apiserver, mirror pods.
//   - prober: liveness, readiness and startup probes (HTTP, TCP, gRPC,
//     exec through runtime.CommandRunner), their results and updates.
//   - admission: ordered pod admit handlers with the kubelet's shape; the
//     built-in checks (MaxPods, privileged, host namespaces).
//   - podmanager: the desired pods by UID and full name, static/mirror
//     translation, for the sync loop's Handler.
//   - agent: the default assembly of all of the above, the easiest place to
//     start.
//   - node: the Node object: registration, node status and conditions as
//     the kubelet reports them, the node Lease, provider hooks; the agent
//     uses it with Config.Node, examples/kubenode joins a real cluster.
//   - provider: a virtual-kubelet provider (the same interfaces, unchanged)
//     as the agent's runtime; it owns its pods' status.
//   - podutil: the config.* annotations, static/mirror pod helpers and the
//     small pod-spec rules (QoS class, pod IP order, sidecars) all packages
//     share.
//   - cm: the kubelet's QoS cgroups for pods and node allocatable, for
//     runtime/cri or any runtime on Linux.
//   - dns: the kubelet's pod DNS configuration (dnsPolicy, cluster DNS,
//     host resolv.conf, limits), for runtime/cri or any runtime.
//   - podenv: container environments as the kubelet builds them (env,
//     envFrom, fieldRef, resourceFieldRef, configMap and secret keys,
//     service variables, $(VAR) expansion), for runtime/cri or any runtime.
//   - volume: pod volumes on the node (hostPath checks, emptyDir on disk or
//     tmpfs, configMap, secret, downwardAPI and projected volumes with
//     service-account tokens, the kubelet's atomic writer).
//   - objects: configMaps, secrets, services and service-account tokens
//     behind client-go-shaped interfaces, cached or watched, for podenv and
//     volume.
//   - sim: a harness for controller tests: many agents on in-memory
//     runtimes against an in-memory API store, on virtual time, seeded.
//
// One lifecycle convention across the packages: a long-running part has
// Run(ctx), which blocks until ctx ends and returns once its goroutines
// have stopped (agent.Agent, node.Controller, pleg.GenericPLEG and
// EventedPLEG, podworkers.PodWorkers, prober.Manager, status.Manager,
// syncloop.Loop, stats.Provider, eviction.Manager, the podconfig
// sources); run it in a goroutine of its own. No method named Start
// blocks.
//
// Other conventions: a health check is a func() error, nil when healthy
// (node.HealthCheck, server.HealthCheck, pleg's Healthy, the agent's
// SyncLoopHealthy and PLEGHealthy); a getter named Shared* (status's
// SharedPodStatus, node's SharedNode) returns the owner's object without a
// copy, read only, where its twin (GetPodStatus, Node) returns a copy the
// caller owns; a package's sentinel errors start with its name (but
// runtime's kubelet reasons, ErrCrashLoopBackOff and the like, whose text
// is the reason), and New rejects bad configuration with an error wrapping
// the package's ErrInvalidConfig first ("syncloop: invalid config: Pods
// is required").
//
// # Deliberate differences from the kubelet
//
// nodekit follows the kubelet (pkg/kubelet) wherever it can; these are the
// places where it knowingly does not, and why:
//
//   - A crash-looping sidecar (restartable init container) of a pod with
//     restartPolicy Never is shown waiting in CrashLoopBackOff; kubelet
//     1.34 shows it terminated. The sidecar is restarted whatever the pod's
//     policy, and nodekit decides the waiting reason from the container's
//     own effective policy, as for every other restarting container; the
//     kubelet looks at the pod's policy only. (status)
//   - nodekit tells the containers of a recreated sandbox from those of the
//     old one (ContainerStatus.SandboxID, creation times); the kubelet
//     cannot (see its computeInitContainerActions). So after a sandbox
//     recreation a pod counts as initialized only once a regular container
//     runs in the new sandbox: a pod whose sidecar has no startup probe is
//     Pending until then, where the kubelet may count the old sandbox's
//     containers and report Running. Likewise a container that exited and
//     whose restart policy keeps it down is not started in the new sandbox;
//     the kubelet spares only containers that succeeded under OnFailure.
//     (status, runtime.ComputePodActions)
//   - Mirror pods are created, replaced and deleted by the status manager
//     as part of its sync, not by SyncPod: it already holds the apiserver
//     client and the static/mirror UID mapping, and so the runtime path
//     never waits on the apiserver. (status)
//   - No informers: the status manager does not notice a status someone
//     else changed until its own next change of it (the periodic reconcile
//     resends only what the apiserver has not acknowledged). Fewer moving
//     parts and no client-go in the library. Single objects are watched, as the
//     kubelet's informers and reflectors would keep them, where a client
//     can watch: the node controller's own Node, as the kubelet's node
//     informer (without a watch it reads the Node at each status
//     computation, as the kubelet also does), and configMaps and secrets
//     for environments and volumes one by one as the kubelet's Watch
//     strategy does, only with objects.Config.Watch and Cache.Run
//     (examples/kubenode does); without,
//     and for services always, they are read again every TTL (1m), the
//     kubelet's Cache strategy; so are image pull secrets
//     (agent.Config.Secrets). (status, node, objects, agent)
//   - Static pod UIDs are hashed from the manifest's protobuf encoding, so
//     they are stable across restarts of one program but differ from the
//     UIDs the kubelet derives for the same manifest. (podconfig/staticpod)
//   - Unknown and duplicate fields of static manifests, which the kubelet
//     drops silently, give a FieldValidationWarning event on the pod (the
//     pod runs without them), and an invalid pod's error names the unknown
//     fields, since a typo is the usual cause. (podconfig/staticpod)
//   - A pod without a UID (client-go's fake clientset makes such pods; the
//     apiserver never does) is dropped by podconfig with one
//     FailedValidation event and error log, since every part keys pods by
//     UID. (podconfig)
//   - Admission can be restricted with agent.Config.DenyPrivileged and
//     DenyHostNamespaces (and runtime/cri's DenyPrivileged), options the
//     current kubelet no longer has; by default both are admitted, as by
//     the kubelet. (agent, runtime/cri)
//   - Admission makes no request: when a pod's node selector or required
//     node affinity misses the Node it knows, the kubelet reads the Node
//     from the apiserver and checks again; the agent does not make a pod
//     wait for the apiserver. Before registration, such a miss against the
//     Node the agent would register admits the pod (a Node registered
//     before may carry labels others gave it); after, the pod is checked
//     against the Node as the controller last wrote or read it, on which
//     labels others changed since show only after its next conflict.
//     (admission, agent)
//   - The DeadlineExceeded event of activeDeadlineSeconds is recorded once,
//     when the pod is failed; the kubelet records it at every status
//     generation past the deadline. (agent)
//   - pod_start_sli_duration_seconds does not subtract image pull time: the
//     runtime contract does not report it. (agent)
//   - A volume that cannot be set up (a missing configMap, a refused token)
//     holds the pod's containers back with CreateContainerConfigError and
//     the kubelet's "MountVolume.SetUp failed for volume ..." message, and a
//     FailedMount event; the kubelet leaves them in ContainerCreating with
//     the event only. The reason makes the cause visible in the status.
//     (runtime/cri, volume)
//   - The sizeLimit of emptyDirs on disk is not enforced (the kubelet's
//     eviction manager does it). (volume)
//   - The files of configMap, secret, downwardAPI and projected volumes are
//     given to the pod's fsGroup when a new version is written, each
//     version a new tree; the kubelet walks the volume again at every
//     remount. fsGroupChangePolicy therefore matters for emptyDirs only,
//     whose ownership is set once, when made, as the kubelet's. (volume)
//   - spec.hostnameOverride is honoured without the kubelet's
//     HostnameOverride feature gate; the apiserver's validation (no
//     setHostnameAsFQDN, no hostNetwork) is left to the apiserver.
//     (runtime/cri)
//   - Variables from envFrom keep a stable order (sorted keys, then env in
//     declaration order, then service variables); the kubelet's follows
//     map iteration. envFrom keys no environment can hold (with '=' or
//     control characters) are skipped with the kubelet's
//     InvalidEnvironmentVariableNames event, which current kubelets, relying
//     on the apiserver's relaxed validation, no longer check. (podenv)
//   - A preStop hook still running when the grace period ends is
//     abandoned (its exec or HTTP request is cancelled) and records no
//     FailedPreStopHook; the kubelet stops waiting but lets it run on.
//     The 2-second minimum between TERM and KILL is applied once a preStop
//     hook ran; without one the grace period is runtime.EffectiveGracePeriod
//     (at least 1s). Lifecycle hooks' HTTP connections are not kept alive,
//     so no idle connection outlives a hook. An exec hook through
//     runtime/cri is bounded only by the sync's or kill's context, as with
//     the kubelet. (runtime/lifecycle, runtime/cri, runtime/fake)
//   - A probe kill's Killing event is the runtime's when it records events
//     (runtime.EventSource; the agent passes its message with
//     runtime.WithKillMessage), else the agent's, so it is recorded once.
//     FailedKillPod is not recorded for a kill cut short by a newer update
//     of the pod. (agent)
//   - The node controller reads the runtime's image list in its status
//     loop once the last read is ImageRefreshPeriod (30s) old, rather than
//     in a goroutine of its own as the kubelet's image manager, so that on
//     a fake clock a status does not depend on goroutine order; -node-ip
//     (node.Config.NodeIPs) takes a loopback address or one the host does
//     not have, which the kubelet refuses (simulated nodes, tests); a new
//     boot ID records no NodeRebooted event. (node)
//   - Stats come without cadvisor: the node's and pods' CPU and memory
//     from cgroups and /proc read at each summary, so pod CPU rates
//     (usageNanoCores) appear only once stats.Provider.Run (or another
//     updating caller, as the eviction manager) took two samples, for the
//     node and for pods alike; the kubelet's cadvisor keeps node rates
//     itself. Summaries have no volume, network or PSI stats and no
//     kubelet, runtime or misc system containers. (stats)
//
// Every external dependency (runtime, apiserver clients, clock, logger) is an
// interface the caller can fill with a fake. The smallest useful assembly is
// agent.New with a node name and runtime/fake's runtime; see
// examples/standalone.
package nodekit
