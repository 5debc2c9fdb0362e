// Package fake is an in-memory runtime.Runtime (with
// runtime.GarbageCollector, runtime.ImageService, runtime.ContainerEventer,
// runtime.EventSource, runtime.ContainerStreamer and runtime.PortForwarder)
// for tests of everything above the runtime: the PLEG relists it, pod workers
// and the agent sync pods on it, and users test their own assemblies with it.
//
// Pods and containers move through real states. SyncPod carries out
// runtime.ComputePodActions (the same plan the CRI manager follows):
// sandboxes, init containers one at a time, sidecars, restart policies, spec
// changes, crash-loop back-off through the *runtime.Backoff it is given and
// image pulls with their own back-off. KillPod stops containers with their
// grace period and records it. Behaviour is programmable per container name
// or image (exit with a code after a while, fail to start, fail to pull, take
// time to start, ignore TERM), faults can be injected per method with a
// probability from a seeded source, and every call is counted.
//
// Time comes only from Config.Clock: a container programmed to exit after D
// is evaluated lazily on every read against the clock, so with a fake clock
// everything is deterministic and no goroutine runs in the background.
// Latencies and grace periods of containers that ignore TERM block the call
// on the clock until it is stepped or ctx ends.
//
// Usage: the package Example makes a container crash a minute after it
// starts and walks it into crash-loop back-off on a fake clock.
//
// Where the fake differs from a real runtime:
//   - No processes, images or volumes; an image is a name,
//     pulling it is instant unless programmed otherwise, RemoveImage does
//     not check whether containers use it.
//   - Logs (GetContainerLogs, runtime.ContainerLogs) hold only what was
//     programmed: Behavior.Logs printed at start and WriteLog lines, kept
//     in memory in the CRI format with the container.
//   - ExecSync (exec probes) runs nothing: it answers what SetExecResult
//     programmed per container name and command (exit 0 otherwise), and a
//     command programmed to hang fails with runtime.ErrExecTimeout when its
//     timeout has passed on the clock.
//   - Exec sessions (runtime.ContainerStreamer) run what SetExecResult
//     programmed as ExecSync does, with stdin echoed to stdout if the
//     result says EchoStdin; Attach streams the container's WriteLog lines
//     from the attach on, and echoes stdin lines to its log when the spec
//     has stdin. A read of stdin blocked when a session ends ends when the
//     caller closes stdin, as the kubelet API does.
//   - Pods are on an in-memory network (DialPod, which the agent's
//     httpGet, tcpSocket and grpc probes use): a pod answers as a healthy
//     server on a port while a container that declares it (or any, for a
//     port none declares) runs and is past Behavior.ReadyAfter, and refuses
//     connections otherwise. PortForward (runtime.PortForwarder) reaches
//     it the same way; nothing else does.
//   - IDs are "fake://c<n>" for containers and "sandbox<n>" for sandboxes;
//     pod IPs are 10.x.y.z from a counter, or the host addresses of
//     Config.PodCIDR in turn (a node's pod CIDR, so that the runtimes of
//     many nodes give distinct IPs); host-network pods have none.
//   - SyncPod trusts the status it is given, as the kubelet does; a stale
//     status can start a second instance of a container. A nil status means
//     the fake's current one.
//   - A container stops on TERM at once (exit code Behavior.TermExitCode,
//     default 0) unless it ignores TERM. KillPod sends TERM to regular
//     containers, then to sidecars in reverse order, without waiting for
//     regular containers that ignore it (runtime/cri and the kubelet
//     make a sidecar wait until they stopped).
//   - Lifecycle hooks run as runtime/cri runs them (runtime/lifecycle):
//     exec hooks through ExecSync (so SetExecResult programs them), httpGet
//     hooks over the in-memory network (an https hook gets a plain HTTP
//     answer and falls back to http with a LifecycleHTTPFallback warning),
//     sleep hooks on the clock; a preStop hook's time is taken out of the
//     grace period. Hooks lists what ran.
//   - With Config.Recorder the runtime records the kubelet's
//     runtime-manager events as runtime/cri does; a pull takes no time
//     (SetLatency("PullImage") aside), so Pulled says "in 0s". An image
//     pulled at this instant of the clock counts as not present yet for
//     other pods, so syncs at the same instant all pull it whichever runs
//     first, and report the same events.
//   - Stopping a sandbox kills what still runs in it with exit code 137.
//   - GetPods orders pods newest first by when the fake first saw them, not
//     by sandbox creation time.
//   - GarbageCollect cannot ask the pod sources which pods are gone; with
//     allSourcesReady it removes pods that KillPod stopped and nothing
//     restarted.
//   - A start that fails with a StartError other than a create error leaves
//     an exited container (code 128, reason StartError), like containerd.
//   - Resource usage (ListPodStats, NodeStats, ImageFsInfo) is only what
//     was scripted: Behavior.Usage from a container's start, SetUsage while
//     it runs, SetNodeCapacity and SetNodeOverhead for the node. CPU time
//     grows at the scripted rate and memory and disk by their growth per
//     second on the clock; nothing enforces limits (no OOM kill). Without
//     SetImageFsCapacity images and writable layers are on nodefs.
//   - Injected faults draw from one seeded source in call order: they repeat
//     exactly for the same seed and the same sequence of calls, which
//     concurrent callers do not guarantee.
//   - The container event stream (WatchContainerEvents) reports a
//     programmed exit at its time on the clock only while a stream is open
//     (a timer per exit); without one, a call observes it first. Seeded
//     pods (AddRunningPod) report nothing.
package fake
