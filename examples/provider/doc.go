// Command provider is a virtual-kubelet style node on nodekit whose pods are
// not containers: it runs each container of a static pod as a local process,
// through the runtime.Runtime in ./procruntime, and prints the same live view
// as ./examples/standalone.
//
//	go run ./examples/provider -pod-manifest-path DIR
//
// A container's command (and args) runs from the host's PATH; its image is
// ignored. Output goes to <-log-root>/<namespace>_<name>_<uid>/<container>/<restart>.log.
// SIGINT or SIGTERM stops every process gracefully (TERM, then KILL after the
// pod's grace period) and exits 0.
//
// How little a provider author writes: procruntime is about 440 lines for
// everything a backend must do — start and stop processes and report their
// state (SyncPod, KillPod, GetPods, GetPodStatus, Status). Deciding what to
// start, restart or kill is runtime.ComputePodActions, the same planner the
// CRI manager uses; pod sources, the sync loop, pod workers, the PLEG, restart
// back-off and API status generation come from agent.New. This program adds
// flags and the view: agent.New(agent.Config{NodeName: ..., Runtime: rt,
// StaticPodPath: ...}) and Run.
package main
