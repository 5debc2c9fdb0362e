// Package lifecycle runs containers' lifecycle hooks (postStart and
// preStop handlers) as the kubelet's handler runner does, for every
// runtime that starts and stops containers itself: runtime/cri runs them
// over the CRI's ExecSync and the host's network, runtime/fake over its
// programmed exec results and its in-memory pod network.
//
// A Runner takes the runtime's CommandRunner (exec handlers), a dialer
// (httpGet handlers) and a clock (sleep handlers):
//
//   - exec runs the command with no timeout of its own (the kubelet passes
//     none); it fails on an error or a non-zero exit code, with the
//     kubelet's "command '...' exited with N: <stderr>";
//   - httpGet sends a GET to the handler's host (default: the pod's IP,
//     from Config.PodIP), port (a number or a named container port) and
//     path, scheme http or https (certificates are not verified), with its
//     headers, following redirects to the same host only; only a failed
//     request fails the hook, any status code passes, as with the kubelet.
//     An https request answered in plain HTTP is retried over http without
//     its Authorization header and a LifecycleHTTPFallback warning is
//     recorded;
//   - sleep waits its seconds on the clock, or fails when ctx ends first.
//
// The caller bounds a hook with ctx: a preStop hook with the container's
// grace period (see PreStop, which also says how much of it is left), a
// postStart hook with nothing but the sync's ctx. Failure messages are the
// kubelet's ("Exec lifecycle hook ([...]) for Container \"c\" in Pod
// \"p_ns(uid)\" failed - error: ..., message: ...").
//
// Ordering holds a pod's sidecars back, when the pod is stopped, until the
// containers they serve are stopped, as the kubelet's terminationOrdering.
//
// Where it differs from the kubelet: connections are not kept alive
// between hooks, so no idle connection outlives a hook.
package lifecycle
