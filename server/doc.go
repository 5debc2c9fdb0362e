// Package server is the kubelet's HTTP API over nodekit's parts: what an
// operator and `kubectl logs` expect of a node agent.
//
//   - /healthz: "ok", or 500 with the failing checks in the apiserver's
//     healthz text ("[-]syncloop failed: reason withheld ... healthz check
//     failed"); /healthz/<check> runs one. "ping" always passes; the
//     agent's SyncLoopHealthy and PLEGHealthy are the checks to add.
//   - /pods: the agent's pods with their statuses, a v1 PodList in JSON.
//   - /runningpods/: what the runtime runs, as pods with their containers.
//   - /metrics: a prometheus.Gatherer, such as the registry the agent's
//     metrics are on.
//   - /containerLogs/{namespace}/{pod}/{container}: a container's logs with
//     the kubelet's query (follow, tailLines, limitBytes, timestamps,
//     sinceSeconds, sinceTime, previous), its status codes and messages,
//     read through a runtime's optional runtime.ContainerLogs (runtime/cri
//     reads the CRI log files under the pod log directory).
//   - /exec/{namespace}/{pod}[/{uid}]/{container} (GET or POST,
//     ?command=...&input=1&output=1&error=1&tty=1), /attach/... and
//     /portForward/{namespace}/{pod}[/{uid}] (?port= over WebSocket): what
//     `kubectl exec`, `attach` and `port-forward` reach through the
//     apiserver, with the kubelet's status codes and messages (no streams
//     400, an unknown pod 404 "pod does not exist", a container the runtime
//     does not run 500 "container not found (...)"). A runtime that streams
//     in process (runtime.ContainerStreamer, runtime.PortForwarder:
//     runtime/fake, a provider) gets the sessions through package
//     server/streaming's SPDY and WebSocket protocols; one with a
//     streaming server of its own (runtime.StreamURLer: runtime/cri) gets
//     the client's upgraded connection proxied to its URL, as the
//     kubelet's. An exec without a command is a 400 here.
//   - POST /run/{namespace}/{pod}[/{uid}]/{container}?cmd=...: the command
//     (split on spaces) run to its end with runtime.CommandRunner, its
//     stdout then stderr as the body; a non-zero exit is a 500 "command
//     '...' exited with N: <stderr>".
//
// A ReadOnly server is the kubelet's read-only port: healthz, pods and
// metrics only. Exec, attach, port-forward and run are authorized as
// nodes/proxy, as the kubelet's. HealthzHandler is the separate healthz port (10248) with
// /healthz alone. Auth puts the kubelet's authentication and authorization
// filter in front (401, 403 with its message; as the kubelet's fine-grained
// authorization, /pods, /runningpods/, /healthz and /configz are allowed by
// their own subresource or by proxy), through two small
// interfaces in the shape of its webhook authenticator and authorizer,
// every authenticated user but the anonymous one put in
// system:authenticated as the kubelet's; without Auth, serve on loopback
// only. WebhookAuthenticator (client
// certificates verified by TLS, else a TokenReview of the bearer token) and
// WebhookAuthorizer (a SubjectAccessReview of nodes/<subresource> for the
// user's name, UID, groups and Extra) are the
// kubelet's webhook modes over client-go-shaped clients
// (clientset.AuthenticationV1().TokenReviews(),
// clientset.AuthorizationV1().SubjectAccessReviews()). ListenAndServe
// serves with or without TLS until its context ends.
//
// Where it sits: beside the agent, reading its views (agent.Agent.Pods, the
// health checks) and the runtime; it changes nothing.
//
//	srv, err := server.New(server.Config{
//		Pods:         a, // *agent.Agent
//		RunningPods:  rt,
//		Logs:         rt, // if rt implements runtime.ContainerLogs
//		StreamURLs:   rt, // if rt implements runtime.StreamURLer (else Streaming, PortForward)
//		Exec:         rt, // if rt implements runtime.CommandRunner
//		Metrics:      reg,
//		HealthChecks: []server.HealthCheck{{Name: "syncloop", Check: a.SyncLoopHealthy}, {Name: "pleg", Check: a.PLEGHealthy}},
//	})
//	if err != nil { ... }
//	go server.ListenAndServe(ctx, "127.0.0.1:10250", srv.Handler(), tlsConfig)
//
// Not served (yet): /stats, /spec, /logs, /checkpoint, /configz,
// /debug/pprof, /metrics/cadvisor, /metrics/resource, /metrics/probes.
package server
