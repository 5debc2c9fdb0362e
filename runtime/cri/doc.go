// Package cri is the CRI runtime manager: runtime.Runtime over the
// runtime/v1 gRPC API, so nodekit drives containerd or CRI-O as the
// kubelet's kuberuntime manager does.
//
// Where it sits: agent -> podworkers -> Manager.SyncPod/KillPod -> CRI
// runtime; the PLEG relists with Manager.GetPods and GetPodStatus.
//
// What it owns:
//   - the connection (unix socket, optional separate image endpoint, version
//     check at New, per-call timeouts, message size limit; Unimplemented
//     answers are runtime.ErrNotSupported, never failures);
//   - SyncPod in the kubelet's order over runtime.ComputePodActions, with
//     crash-loop back-off (runtime.Backoff, keyed by runtime.BackoffKey);
//     a pod killed for a new sandbox has its old init containers and their
//     logs removed, so initialization starts over (purgeInitContainers);
//   - runtime.StreamURLer over the CRI's Exec, Attach and PortForward: the
//     URL of a session on the runtime's own streaming server, which the
//     kubelet API proxies the client to (a URL that is not absolute http(s)
//     is an error; a port-forward without a sandbox ID goes to the pod's
//     newest sandbox);
//   - WatchContainerEvents over GetContainerEvents (runtime.ErrNotSupported
//     on containerd 1.6, so an evented PLEG falls back to relisting);
//   - KillPod (containers stopped in parallel with the effective grace
//     period, then the sandboxes), RemovePod, and GarbageCollect (dead
//     containers beyond policy, empty old sandboxes, killed pods);
//   - image pulls: pull policy, QPS and burst, serialized or bounded-parallel
//     pulls, pull back-off, credentials from image pull secrets;
//   - sandbox and container configs from the pod spec, the sandbox's DNS
//     from Config.DNS (the kubelet's dnsPolicy handling, package dns), its
//     cgroup parent from Config.PodCgroups (the QoS hierarchy, package cm;
//     the pod cgroup is removed by KillPod), and
//     the kubelet's wire conventions: the io.kubernetes.* labels and
//     annotations (read back by GetPods and GetPodStatus) and the log layout
//     <PodLogsRoot>/<namespace>_<name>_<uid>/<container>/<restartCount>.log.
//
// Volumes come from Config.Volumes (the volume package: hostPath, emptyDir
// on disk or tmpfs, configMap, secret, downwardAPI and projected volumes
// with service-account tokens, under PodsRoot), set up before anything of
// the pod starts and refreshed at every sync; a volume that cannot be set up
// holds the pod's containers back with CreateContainerConfigError and the
// kubelet's "MountVolume.SetUp failed" message. The termination-message file
// is mounted and read back into the status message, with
// FallbackToLogsOnError.
//
// Container environments come from Config.Env (podenv's resolver: env,
// envFrom, fieldRef, resourceFieldRef, configMap and secret keys, service
// variables); a reference that cannot be resolved is a
// CreateContainerConfigError with the kubelet's message and the container
// starts at a later sync once it resolves.
//
// Not (yet) covered: lifecycle hooks, probes, QoS OOM scores, removal of
// single containers' log files.
//
// Usage: ExampleNew runs a pod over the in-process fake CRI server
// (runtime/cri/fakecri); against containerd only Config.Endpoint changes
// (a runtime not up yet gives an error wrapping ErrRuntimeUnavailable). A
// failed step's reason for the container status is runtime.Reason(err).
//
// Tests use the fake runtime in runtime/cri/fakecri, or a real containerd
// started by hack/containerd.sh (see internal/testenv).
package cri
