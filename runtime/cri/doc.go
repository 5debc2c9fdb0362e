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
//   - stats (runtime.PodStatsLister, runtime.ImageFsInfoer, read by package
//     stats): ListContainerStats of running containers in ready sandboxes,
//     ListPodSandboxStats for pod-level figures where the runtime has it
//     (containerd 1.7+ with pod cgroups), ImageFsInfo with statfs of the
//     image filesystems' mount points;
//   - KillPod (containers stopped in parallel with the effective grace
//     period, sidecars last, then the sandboxes), KillContainer (one
//     container, for a failed probe; the sandbox and the pod cgroup stay:
//     runtime.ContainerKiller), RemovePod, and GarbageCollect (dead
//     containers beyond policy, empty old sandboxes, and the whole stopped
//     pods the policy's PodState lets go: deleted or evicted ones);
//   - image pulls: pull policy, QPS and burst, serialized or bounded-parallel
//     pulls, pull back-off, credentials from image pull secrets;
//   - sandbox and container configs from the pod spec (the sandbox's made
//     only when a sandbox is created or a container is about to start, not
//     on a sync that starts nothing or finds its containers in back-off,
//     so Config.DNS's MissingClusterDNS events are not repeated on every
//     resync), the sandbox's DNS from Config.DNS (the kubelet's dnsPolicy handling, package dns), its
//     hostname as the kubelet's (spec.hostnameOverride, else spec.hostname
//     or the pod's name, cut to 63 characters; the FQDN
//     <hostname>.<subdomain>.<namespace>.svc.<cluster domain> with
//     setHostnameAsFQDN; none on the host's network), its
//     cgroup parent from Config.PodCgroups (the QoS hierarchy, package cm;
//     the pod cgroup is removed by KillPod), and
//     the kubelet's wire conventions: the io.kubernetes.* labels and
//     annotations (read back by GetPods and GetPodStatus) and the log layout
//     <PodLogsRoot>/<namespace>_<name>_<uid>/<container>/<restartCount>.log.
//
// Every container gets the pod's kubelet-managed hosts file at /etc/hosts,
// <PodsRoot>/<uid>/etc-hosts, rewritten at each container start: for a pod on
// the pod network localhost, its IPs with its hostname (and FQDN with a
// subdomain; the cluster domain is Config.DNS's ClusterDomain) and its
// hostAliases, once the sandbox has an IP; for a pod on the host's network
// Config.HostsFile with its hostAliases. A container that mounts something
// at /etc/hosts itself keeps it.
//
// A container whose effective security context has runAsNonRoot but would
// run as root (runAsUser 0, or no runAsUser and an image whose user is root,
// unset, non-numeric or invalid) is not created: CreateContainerConfigError
// and a Failed event with the kubelet's verifyRunAsNonRoot message.
//
// Containers run with the pod's fsGroup among their supplemental groups
// (first, then spec.securityContext.supplementalGroups, with the
// supplementalGroupsPolicy), as the kubelet's, so a non-root container can
// use the volumes the fsGroup owns.
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
// Lifecycle hooks run as the kubelet's (runtime/lifecycle): postStart after
// StartContainer, a failure killing the container (Killing
// "FailedPostStartHook") and failing the start with PostStartHookError;
// preStop before StopContainer, its time taken out of the grace period
// (at least 2s left); exec hooks over ExecSync with no timeout, httpGet
// hooks from this process to the pod IP. An orphan's preStop hook and grace
// periods come from its container's annotations.
//
// With Config.Recorder the manager records the kubelet's runtime-manager
// events with its reasons and messages on the container's reference
// (spec.containers{c}, spec.initContainers{c}): Pulling, Pulled (with the
// pull's duration and image size, or "already present on machine"),
// Failed ("Failed to pull image ...", "Error: ErrImagePull", "Error:
// ImagePullBackOff", "Error: <message>"), BackOff (pull and crash-loop
// back-off), Created, Started, Killing ("Stopping container c" or the
// caller's runtime.WithKillMessage), FailedPostStartHook,
// FailedPreStopHook, and on the pod SandboxChanged and
// FailedCreatePodSandBox.
//
// KillPod stops a pod's sidecars after the containers they serve, as the
// kubelet (lifecycle.Ordering): every preStop hook starts at once, then a
// sidecar waits for the regular containers and the sidecars declared after
// it, out of its grace period.
//
// Container logs are rotated as the kubelet's ContainerLogManager does
// (LogManager, run by its Run): every ContainerLogMonitorInterval (10s)
// each running container's log of ContainerLogMaxSize (10 MiB) or more is
// renamed to <log>.<YYYYMMDD-hhmmss>, the runtime reopens it
// (ReopenContainerLog; if that fails the file is renamed back and the next
// pass tries again), the older rotated files are gzipped and the oldest
// removed so that ContainerLogMaxFiles (5) remain, the live one included.
// A negative ContainerLogMaxSize turns rotation off. Package crilog follows
// a log across its rotations. A container that GarbageCollect or the
// init-container purge removes has its log and rotated logs removed first,
// as the kubelet's removeContainer.
//
// Not (yet) covered: probes (package prober), QoS OOM scores.
//
// Usage: ExampleNew runs a pod over the in-process fake CRI server
// (runtime/cri/fakecri); against containerd only Config.Endpoint changes
// (a runtime not up yet gives an error wrapping ErrRuntimeUnavailable). A
// failed step's reason for the container status is runtime.Reason(err).
//
// Tests use the fake runtime in runtime/cri/fakecri, or a real containerd
// started by hack/containerd.sh (see internal/testenv).
package cri
