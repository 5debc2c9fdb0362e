// Package fakecri is an in-process CRI runtime (runtime/v1 gRPC) for tests:
// a real gRPC server on a unix socket in a temp dir, so the code under test
// dials it exactly as it dials containerd.
//
// It is built on k8s.io/cri-api/pkg/apis/testing's FakeRuntimeService and
// FakeImageService (exposed as Server.Runtime and Server.Images for seeding
// and inspection) and adds what tests of a runtime manager need:
//
//   - containers that exit on command (Exit) or right after they start
//     (SetBehavior with ExitOnStart), with an optional log line written to
//     the container's log file in the CRI log format;
//   - ReopenContainerLog recreates a running container's log file, as
//     containerd does after the kubelet rotated it;
//   - injectable errors per method, once (FailNext) or until cleared
//     (SetError), and injectable latency per method (SetLatency);
//   - responses rewritten per method (SetResponseRewrite), to send a
//     client malformed or enormous answers;
//   - per-method call counters (Calls, CallCounts, ResetCalls);
//   - the timeout each StopContainer received (StopTimeout) and the image
//     and credential of each pull (Pulls).
//
// Usage: runtime/cri's ExampleNew runs a pod through a cri.Manager on a
// Server (NewServer, then cri.Config{Endpoint: srv.Endpoint()}); tests then
// make containers exit (Exit) and count calls (Calls).
//
// Where it differs from containerd:
//
//   - nothing runs: containers have no processes, StopContainer exits a
//     container at once (exit code 0, or 137 when the sandbox is stopped)
//     whatever the timeout, and logs hold only what SetBehavior says;
//   - IDs are readable, not random: sandbox "name_namespace_uid_attempt",
//     container "sandboxID_name_attempt";
//   - every sandbox gets the IP 192.168.192.168, also with host network;
//   - images need no pulling: PullImage of any name succeeds unless an
//     error is injected, ImageStatus knows the images pulled or seeded with
//     Images.SetFakeImages; the pause image is not needed;
//   - GetContainerEvents streams an event per state change, with the pod's
//     status; a stream more than 1024 events behind loses events. To act as
//     containerd 1.6, which lacks the call, use
//     SetError("GetContainerEvents", status.Error(codes.Unimplemented, ""));
//   - Exec, Attach and PortForward return single-use URLs (valid for a
//     minute, as containerd's) on a streaming server of the fake's own, an
//     HTTP listener on 127.0.0.1 (StreamingURL) that Close stops with the
//     sessions in flight; they check what containerd checks (the container
//     running, the sandbox ready, a TTY without stderr). The sessions speak
//     the kubelet's protocols (package server/streaming, SPDY and
//     WebSocket) but run nothing: exec writes the output programmed with
//     SetExecResult and exits with its code, attach echoes stdin until the
//     container exits, and a forwarded port answers with its
//     SetPortHandler or refuses the connection;
//   - times come from Config.Clock, so a fake clock gives fixed timestamps.
//
// It does behave like containerd where a runtime manager depends on it:
// names (sandbox and container metadata) are reserved, so a duplicate
// RunPodSandbox or CreateContainer fails with AlreadyExists; containers are
// created only in ready sandboxes; a container starts only once; missing
// objects give NotFound, except on Remove*, which are idempotent;
// StopPodSandbox stops the sandbox's containers and RemovePodSandbox removes
// them.
package fakecri
