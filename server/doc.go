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
//   - /stats/summary (GET or POST): the kubelet's stats Summary in JSON
//     from a StatsProvider (package stats, or a virtual-kubelet provider's
//     GetStatsSummary), CPU and memory only with ?only_cpu_and_memory=true;
//     500 "Internal Error: ..." when it fails, 404 when the provider has
//     no stats (runtime.ErrNotSupported). As in the kubelet v1.37, no other
//     /stats path is served.
//   - /metrics/resource: the kubelet's resource metrics
//     (node_cpu_usage_seconds_total, container_memory_working_set_bytes,
//     ...) from a ResourceMetricsProvider, what metrics-server scrapes.
//   - /containerLogs/{namespace}/{pod}/{container}: a container's logs with
//     the kubelet's query (follow, tailLines, limitBytes, timestamps,
//     sinceSeconds, sinceTime, previous), its status codes and messages,
//     read through a runtime's optional runtime.ContainerLogs (runtime/cri
//     reads the CRI log files under the pod log directory). A running
//     container whose status has no ID (a virtual-kubelet provider's) is
//     the one of that name RunningPods lists.
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
// A ReadOnly server is the kubelet's read-only port: healthz, pods, the
// stats summary and metrics only. HealthzHandler is the separate healthz port (10248) with
// /healthz alone.
//
// Auth puts the kubelet's authentication and authorization filter in
// front (401 "Unauthorized", 403 "Forbidden (user=..., verb=...,
// resource=nodes, subresource(s)=[...])", 500 on an authorization error),
// every authenticated user but the anonymous one put in
// system:authenticated as the kubelet's. Its attributes are the kubelet's
// of v1.37 (fine-grained authorization locked on): /pods and /runningpods/
// are nodes/pods or nodes/proxy; /healthz, /configz and /statusz their own
// subresource or proxy; /stats, /metrics (/metrics/resource ...), /logs
// and /checkpoint only stats, metrics, log and checkpoint; anything else
// (/containerLogs, /exec, /attach, /portForward, /run) proxy; the verb
// (get, create, update, patch, delete) from the method. Without Auth,
// serve on loopback only.
//
// NewAuthenticator is the kubelet's authenticator (AuthnConfig): a client
// certificate verified against ClientCAs (--client-ca-file; serve with
// tls.RequestClientCert, as the kubelet, so that a bad one is a 401), else
// a bearer token reviewed by a TokenReview (--authentication-token-webhook)
// and kept CacheTTL (the kubelet's 2m) on the injected clock, else, with
// Anonymous, system:anonymous; credentials that fail are refused, never
// anonymous. NewWebhookAuthorizer is --authorization-mode=Webhook
// (AuthzConfig): a SubjectAccessReview of nodes/<subresource> for the
// user's name, UID, groups and Extra, an allowed answer kept
// AuthorizedTTL (5m), a refusal UnauthorizedTTL (30s), an error never;
// AlwaysAllow is --authorization-mode=AlwaysAllow. Both webhooks retry a
// review that fails for a passing reason (internal error, timeout, too
// many requests, connection reset) as the kubelet's: 500ms growing 1.5
// times, five tries. They take client-go's
// typed clients as they are (clientset.AuthenticationV1().TokenReviews(),
// clientset.AuthorizationV1().SubjectAccessReviews()).
// WebhookAuthenticator and WebhookAuthorizer are the same without caches
// or anonymous requests. ListenAndServe
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
//		Stats:        sp, // *stats.Provider
//		ResourceMetrics: sp,
//		HealthChecks: []server.HealthCheck{{Name: "syncloop", Check: a.SyncLoopHealthy}, {Name: "pleg", Check: a.PLEGHealthy}},
//	})
//	if err != nil { ... }
//	go server.ListenAndServe(ctx, "127.0.0.1:10250", srv.Handler(), tlsConfig)
//
// Not served (yet): /spec, /logs, /checkpoint, /configz, /debug/pprof,
// /metrics/cadvisor.
package server
