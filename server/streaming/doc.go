// Package streaming serves the kubelet's streaming protocols, server side:
// remotecommand (exec and attach) and port forwarding, over SPDY and
// WebSocket, as k8s.io/cri-streaming's server does for the kubelet and the
// CRI runtimes. The caller decides what a session runs; this package only
// speaks the protocols and hands over the client's streams.
//
//   - remotecommand over SPDY (X-Stream-Protocol-Version): channel.k8s.io
//     (v1, with its known bugs: stdin closed at once, no error stream),
//     v2.channel.k8s.io, v3 (terminal resize), v4 (the error stream carries
//     a metav1.Status in JSON; a non-zero exit is reason NonZeroExitCode
//     with the code in details.causes[ExitCode]) and v5.channel.k8s.io,
//     which over SPDY is v4 (a SPDY stream half-closes on its own). The
//     client has Config.CreationTimeout to create its streams after the
//     upgrade.
//   - remotecommand over WebSocket (Sec-WebSocket-Protocol): channel.k8s.io,
//     base64.channel.k8s.io, v4.channel.k8s.io, v4.base64.channel.k8s.io
//     and v5.channel.k8s.io (the client may close stdin with the CLOSE
//     signal): channels 0-4 are stdin, stdout, stderr, error and resize.
//   - port forwarding over SPDY (portforward.k8s.io): a data and an error
//     stream per requestID, each with a port header; over WebSocket
//     (v4.channel.k8s.io, v4.base64.channel.k8s.io) a data and an error
//     channel per ?port=, each starting with the port as two little-endian
//     bytes.
//
// Connections close after Config.IdleTimeout without traffic. Not served:
// the SPDY-over-WebSocket tunnel (SPDY/3.1+portforward.k8s.io) that kubectl
// port-forward speaks to an apiserver; the apiserver translates it to SPDY
// for a node that does not declare ExtendWebSocketsToKubelet.
//
// Where it sits: package server serves the kubelet API's /exec, /attach and
// /portForward with it for runtimes that stream in process
// (runtime.ContainerStreamer, runtime.PortForwarder); a CRI runtime's own
// streaming server (as runtime/cri/fakecri's) can serve with it too.
//
//	s := streaming.New(streaming.Config{})
//	opts, err := streaming.NewOptions(r)
//	if err != nil {
//		http.Error(w, err.Error(), http.StatusBadRequest)
//		return
//	}
//	s.ServeExec(w, r, opts, func(ctx context.Context, io runtime.AttachIO) error {
//		return rt.Exec(ctx, pod, id, cmd, io)
//	})
package streaming
