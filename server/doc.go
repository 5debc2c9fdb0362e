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
//     reads the CRI log files under the pod log directory).
//
// A ReadOnly server is the kubelet's read-only port: healthz, pods, the
// stats summary and metrics only. HealthzHandler is the separate healthz port (10248) with
// /healthz alone. Auth puts the kubelet's authentication and authorization
// filter in front (401, 403 with its message; as the kubelet's fine-grained
// authorization, /pods, /runningpods/, /healthz and /configz are allowed by
// their own subresource or by proxy; /stats by nodes/stats and
// /metrics/resource by nodes/metrics alone), through two small
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
//		Metrics:      reg,
//		Stats:        sp, // *stats.Provider
//		ResourceMetrics: sp,
//		HealthChecks: []server.HealthCheck{{Name: "syncloop", Check: a.SyncLoopHealthy}, {Name: "pleg", Check: a.PLEGHealthy}},
//	})
//	if err != nil { ... }
//	go server.ListenAndServe(ctx, "127.0.0.1:10250", srv.Handler(), tlsConfig)
//
// Not served (yet): /spec, /logs, /exec, /attach, /portForward,
// /run, /checkpoint, /configz, /debug/pprof, /metrics/cadvisor.
package server
