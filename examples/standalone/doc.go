// Command standalone is a node agent on nodekit that runs static pods without
// an apiserver, as the kubelet does in standalone mode, and prints a live
// view of its pods.
//
// From the repository root:
//
//	go run ./examples/standalone                 # the in-memory runtime, examples/standalone/manifests
//	go run ./examples/standalone -duration 10s   # stop by itself after 10s
//	sudo go run ./examples/standalone -cri unix:///run/containerd/containerd.sock
//
// It reads pods from -pod-manifest-path (and -manifest-url), runs them on the
// built-in in-memory runtime (runtime/fake) or, with -cri, on a real CRI
// runtime through runtime/cri, and prints a table of pods, phases and
// containers to stdout whenever it changes. Logs go to stderr (-v for more).
// SIGINT or SIGTERM stops every pod gracefully, then the program exits 0.
//
// The in-memory runtime runs no commands. Its containers run until stopped;
// init containers exit 0 after a second; a pod's annotation
// fake.nodekit.io/exit: "name=duration[:code],..." makes the named
// containers exit that long after they start, and fake.nodekit.io/exec-fail
// (same format, code default 1) makes commands run in the named containers,
// such as exec probes, fail once the container has run that long (see
// manifests/probes.yaml); other commands succeed. -cri ignores the
// annotations: the real commands run.
//
// It serves the kubelet's endpoints (package server): /healthz on
// 127.0.0.1:10248 (-healthz-port), and /healthz, /pods, /runningpods/,
// /metrics, /containerLogs, /exec, /attach, /portForward and /run on
// 127.0.0.1:10250 (-port; TLS with -tls-cert-file, required off loopback;
// exec, attach and port-forward as the runtime offers them: in process on
// the fake runtime, proxied to the runtime's streaming server on a CRI
// runtime that gives its URLs); -read-only-port adds the kubelet's
// read-only API. /metrics has the kubelet's metric names:
//
//	curl localhost:10248/healthz                       # ok
//	curl -s localhost:10250/metrics | grep ^kubelet_
//	curl localhost:10250/containerLogs/default/web-$(hostname)/web?tailLines=5
//	curl -X POST "localhost:10250/run/default/web-$(hostname)/web?cmd=ls+/"
//
// Run `go run ./examples/standalone -h` for every flag.
package main
