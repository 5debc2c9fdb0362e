// Package procruntime is a virtual-kubelet style provider that is not CRI at
// all: it implements runtime.Runtime by running each container of a pod as a
// local process (os/exec). It shows how little a provider author must write:
// runtime.ComputePodActions decides what to start and kill, the provider only
// starts and stops processes and reports their state.
//
// What it ignores: images (the container's command runs from the host's
// PATH), namespaces, cgroups and resources. Each pod gets a pretend sandbox
// on the host network so the shared planner sees a ready sandbox. Each
// container runs in its own process group: TERM and KILL reach what it
// started, and nothing it started outlives it, as in a real container. Container
// output goes to <Root>/<namespace>_<name>_<uid>/<container>/<restart>.log, the
// kubelet's layout.
package procruntime
