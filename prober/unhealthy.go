package prober

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// StatusSetter takes readiness and startup verdicts into pod statuses;
// status.Manager has these methods.
type StatusSetter interface {
	SetContainerReadiness(podUID types.UID, id runtime.ContainerID, ready bool)
	SetContainerStartup(podUID types.UID, id runtime.ContainerID, started bool)
}

// ApplyUpdate does with an Update what the kubelet's sync loop does with
// the prober's result channels: a readiness or startup verdict goes to s,
// and the pod is to be synced again (resync true) after a readiness or
// startup change or a liveness failure, so that its status is written and
// a container that failed its liveness or startup probe is killed (see
// KillUnhealthy) and restarted as its restart policy says.
//
//	for u := range m.Updates() {
//		if prober.ApplyUpdate(statusManager, u) {
//			resync(u.PodUID)
//		}
//	}
func ApplyUpdate(s StatusSetter, u Update) (resync bool) {
	switch u.Type {
	case Readiness:
		s.SetContainerReadiness(u.PodUID, u.ContainerID, u.Result == Success)
	case Startup:
		s.SetContainerStartup(u.PodUID, u.ContainerID, u.Result == Success)
	case Liveness:
		return u.Result == Failure
	}
	return true
}

// Unhealthy is a running container whose liveness or startup probe
// failed, to be killed as the kubelet's computePodActions kills it.
type Unhealthy struct {
	// Name is the container's (a regular container's or a sidecar's).
	Name string
	// Probe is Liveness or Startup.
	Probe ProbeType
	// Message is the kubelet's reason for the kill, the message of its
	// Killing event: "Container app failed liveness probe, will be
	// restarted" ("Init container ..." for a sidecar; no "will be
	// restarted" where the restart policy is Never).
	Message string
	// GracePeriod is the probe's terminationGracePeriodSeconds when it
	// sets one and the pod is not being deleted; nil: the pod's.
	GracePeriod *int64
	// Target is the pod with only this container, as KillPod takes it.
	Target runtime.Pod
}

// Unhealthy returns the running containers of pod (rs, its runtime
// status) whose last liveness or startup verdict is Failure, liveness
// first as the kubelet checks it; none for a pod being deleted.
func (m *Manager) Unhealthy(pod *v1.Pod, rs *runtime.PodStatus) []Unhealthy {
	if rs == nil || pod.DeletionTimestamp != nil {
		return nil
	}
	var out []Unhealthy
	for _, cs := range rs.ContainerStatuses {
		if cs.State != runtime.ContainerStateRunning {
			continue
		}
		c, sidecar := probedContainer(pod, cs.Name)
		if c == nil {
			continue
		}
		var p *v1.Probe
		var typ ProbeType
		if r, ok := m.Result(Liveness, cs.ID); ok && r == Failure {
			p, typ = c.LivenessProbe, Liveness
		} else if r, ok := m.Result(Startup, cs.ID); ok && r == Failure {
			p, typ = c.StartupProbe, Startup
		} else {
			continue
		}
		kind := "liveness"
		if typ == Startup {
			kind = "startup"
		}
		msg := fmt.Sprintf("Container %s failed %s probe", c.Name, kind)
		switch {
		case sidecar:
			msg = fmt.Sprintf("Init container %s failed %s probe", c.Name, kind)
		case podutil.ContainerMayRestart(c, &pod.Spec):
			msg += ", will be restarted"
		}
		var grace *int64
		if p != nil && p.TerminationGracePeriodSeconds != nil && pod.DeletionGracePeriodSeconds == nil {
			g := *p.TerminationGracePeriodSeconds
			grace = &g
		}
		out = append(out, Unhealthy{Name: c.Name, Probe: typ, Message: msg, GracePeriod: grace,
			Target: runtime.Pod{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace,
				Containers: []*runtime.Container{{ID: cs.ID, Name: cs.Name, Image: cs.Image, ImageID: cs.ImageID, Hash: cs.Hash, State: cs.State}}}})
	}
	return out
}

// PodKiller stops containers; runtime.Runtime has KillPod.
type PodKiller interface {
	KillPod(ctx context.Context, pod *v1.Pod, runningPod runtime.Pod, gracePeriodOverride *int64) error
}

// KillUnhealthy kills the Unhealthy containers of pod, each with
// KillContainer if k is a runtime.ContainerKiller, else with a KillPod of
// that container alone, under runtime.WithKillMessage (so that a runtime recording events says
// why in its Killing event), and returns those it killed. The caller then
// reads the pod's runtime status again and syncs it, which restarts them
// as the restart policy and back-off say; a runtime that records no events
// leaves the Killing events to the caller. It stops at the first failed
// kill.
func (m *Manager) KillUnhealthy(ctx context.Context, k PodKiller, pod *v1.Pod, rs *runtime.PodStatus) ([]Unhealthy, error) {
	var killed []Unhealthy
	for _, u := range m.Unhealthy(pod, rs) {
		kctx := runtime.WithKillMessage(ctx, u.Message)
		var err error
		if ck, ok := k.(runtime.ContainerKiller); ok && len(u.Target.Containers) == 1 {
			// The container alone: KillPod may take the sandbox and the
			// pod's cgroup with it (runtime/cri), and the pod rebuilt in a
			// new sandbox loses its sidecars' restart counts.
			err = ck.KillContainer(kctx, pod, *u.Target.Containers[0], u.GracePeriod)
		} else {
			err = k.KillPod(kctx, pod, u.Target, u.GracePeriod)
		}
		if err != nil {
			return killed, fmt.Errorf("prober: kill container %s after its failed %s probe: %w", u.Name, strings.ToLower(u.Probe.String()), err)
		}
		killed = append(killed, u)
	}
	return killed, nil
}

// probedContainer returns the regular container or sidecar named name.
func probedContainer(pod *v1.Pod, name string) (c *v1.Container, sidecar bool) {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], false
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.Name == name && podutil.IsRestartableInitContainer(c) {
			return c, true
		}
	}
	return nil, false
}
