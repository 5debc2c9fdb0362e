// Package prober runs the liveness, readiness and startup probes of pods'
// containers, as the kubelet's pkg/kubelet/prober.
//
// It sits beside the sync loop: the agent hands it pods (AddPod, RemovePod,
// CleanupPods), it reads their statuses from the status manager
// (StatusProvider) and reports verdicts in a results cache and on an
// updates stream (Updates), or to a func called in the results' pump
// (Config.OnUpdate, which the agent uses). The pump is a goroutine that
// runs only while changes are pending; Start (which the agent uses) is
// Run without the wait, so an agent without probes holds no prober
// goroutine. The agent turns readiness and startup verdicts
// into the status manager's container readiness and Started, and liveness
// or startup failures into container restarts; status generation asks
// Started and Ready for containers with probes.
//
// One worker (one goroutine) per container and probe type probes every
// periodSeconds once the container runs and its initialDelaySeconds have
// passed; liveness and readiness wait for the startup probe. A verdict
// needs successThreshold successes or failureThreshold failures in a row.
// Readiness is Failure for a new container instance until the first
// verdict, liveness Success, startup Unknown; that initial result is in
// the results cache but not on the updates stream (the kubelet sends it,
// and syncs the pod for nothing: the status already says as much), so a
// new instance's first verdict is its one update. After a liveness failure or
// any startup verdict the worker waits for a new instance of the container.
// A probe that errors (rather than fails: bad spec, unknown named port, a
// runtime error) gives no verdict and an Unhealthy event saying why.
//
// Handlers: httpGet (the kubelet's request, User-Agent, redirects to the
// same host only, 10 KiB of body), tcpSocket, grpc (grpc.health.v1) and
// exec through a runtime that implements runtime.CommandRunner. At most
// Config.MaxConcurrent probes run at once; time comes from Config.Clock.
//
//	m, _ := prober.New(prober.Config{Status: statusManager, Runner: rt.(runtime.CommandRunner)})
//	go m.Run(ctx)
//	m.AddPod(pod)
//	for u := range m.Updates() { ... }
//
// ProbeOnce runs one probe of a container now and returns its verdict and
// output, with no worker, result or event: for a program that schedules
// probes itself, or checks one by hand.
//
// The glue the agent uses between the verdicts, the pod statuses and the
// kills is exported for a program that composes the packages itself:
// ApplyUpdate hands an Update to the status manager (StatusSetter) and
// says whether the pod must be synced again; in that sync, KillUnhealthy
// kills the running containers whose liveness or startup verdict is
// Failure, with the kubelet's Killing messages and the probe's
// terminationGracePeriodSeconds (Unhealthy lists them without killing).
//
//	for u := range m.Updates() {
//		if prober.ApplyUpdate(statusManager, u) {
//			resync(u.PodUID) // whose sync calls m.KillUnhealthy(ctx, rt, pod, rs)
//		}
//	}
package prober
