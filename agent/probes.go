package agent

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/safeevent"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/prober"
	"github.com/nodekit/nodekit/runtime"
)

// Event reasons of probe-driven kills, as the kubelet's.
const ReasonKilling = "Killing"

// newProber builds the agent's prober; exec probes run through the runtime
// if it can run commands, and network probes reach the pods through it if
// they are not on the host's network (runtime/fake's).
func (a *Agent) newProber() (*prober.Manager, error) {
	runner, _ := a.cfg.Runtime.(runtime.CommandRunner)
	var dial func(ctx context.Context, network, address string) (net.Conn, error)
	if d, ok := a.cfg.Runtime.(runtime.PodDialer); ok {
		dial = d.DialPod
	}
	var rec prober.EventRecorder
	if a.cfg.Recorder != nil {
		rec = a.cfg.Recorder
	}
	var jitter func(time.Duration) time.Duration
	if j := a.cfg.Jitter; j != nil {
		jitter = func(period time.Duration) time.Duration { return j(period, 1) - period }
	}
	return prober.New(prober.Config{
		Jitter:     jitter,
		Status:     a.status,
		Runner:     runner,
		Dial:       dial,
		Recorder:   rec,
		Clock:      a.cfg.Clock,
		Log:        a.cfg.Log.WithName("prober"),
		Registerer: a.cfg.ProbeRegisterer,
	})
}

// Prober returns the agent's prober, for a test or a server endpoint.
func (a *Agent) Prober() *prober.Manager { return a.prober }

// runProbeUpdates applies the prober's verdicts until ctx ends, as the
// kubelet's sync loop does: readiness and startup go to the status
// manager, and the pod is synced, which kills a container that failed its
// liveness or startup probe.
func (a *Agent) runProbeUpdates(ctx context.Context) error {
	for {
		var u prober.Update
		select {
		case <-ctx.Done():
			return nil
		case u = <-a.prober.Updates():
		}
		switch u.Type {
		case prober.Readiness:
			a.status.SetContainerReadiness(u.PodUID, u.ContainerID, u.Result == prober.Success)
		case prober.Startup:
			a.status.SetContainerStartup(u.PodUID, u.ContainerID, u.Result == prober.Success)
		case prober.Liveness:
			if u.Result != prober.Failure {
				continue
			}
		}
		if pod, ok := a.pods.GetPodByUID(u.PodUID); ok {
			(*handler)(a).HandlePodSyncs(ctx, []*v1.Pod{pod})
		}
	}
}

// killUnhealthy stops the running containers (and sidecars) of pod whose
// liveness or startup probe failed, as the kubelet's computePodActions, so
// that the runtime's SyncPod restarts them as the restart policy and
// back-off say. It returns the pod's status after the kills, or rs.
func (a *Agent) killUnhealthy(ctx context.Context, pod *v1.Pod, rs *runtime.PodStatus) (*runtime.PodStatus, error) {
	if rs == nil || pod.DeletionTimestamp != nil {
		return rs, nil
	}
	killed := false
	for _, cs := range rs.ContainerStatuses {
		if cs.State != runtime.ContainerStateRunning {
			continue
		}
		c, sidecar := probedContainer(pod, cs.Name)
		if c == nil {
			continue
		}
		var p *v1.Probe
		kind := ""
		if r, ok := a.prober.Result(prober.Liveness, cs.ID); ok && r == prober.Failure {
			p, kind = c.LivenessProbe, "liveness"
		} else if r, ok := a.prober.Result(prober.Startup, cs.ID); ok && r == prober.Failure {
			p, kind = c.StartupProbe, "startup"
		} else {
			continue
		}
		msg := fmt.Sprintf("Container %s failed %s probe", c.Name, kind)
		switch {
		case sidecar:
			msg = fmt.Sprintf("Init container %s failed %s probe", c.Name, kind)
		case restarts(pod, c):
			msg += ", will be restarted"
		}
		var grace *int64
		if p != nil && p.TerminationGracePeriodSeconds != nil && pod.DeletionGracePeriodSeconds == nil {
			grace = p.TerminationGracePeriodSeconds
		}
		a.log.Info("Killing unhealthy container", "pod", podutil.FullName(pod), "container", c.Name, "reason", msg)
		kctx := ctx
		if es, ok := a.cfg.Runtime.(runtime.EventSource); ok && es.RecordsEvents() {
			kctx = runtime.WithKillMessage(ctx, msg) // the runtime's Killing event says why
		} else {
			a.containerEvent(pod, c.Name, v1.EventTypeNormal, ReasonKilling, msg)
		}
		if err := a.killContainer(kctx, pod, cs, grace); err != nil {
			return rs, fmt.Errorf("kill container %s after its failed %s probe: %w", c.Name, kind, err)
		}
		killed = true
	}
	if !killed {
		return rs, nil
	}
	// SyncPod decides on the restart from the state after the kill.
	return a.cfg.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
}

// killContainer stops one container and nothing else of the pod: through
// the runtime's KillContainer if it has one, else through KillPod with that
// container alone (a runtime without ContainerKiller must then leave the
// pod's sandbox be).
func (a *Agent) killContainer(ctx context.Context, pod *v1.Pod, cs *runtime.ContainerStatus, grace *int64) error {
	c := runtime.Container{ID: cs.ID, Name: cs.Name, Image: cs.Image, ImageID: cs.ImageID, Hash: cs.Hash, State: cs.State}
	if k, ok := a.cfg.Runtime.(runtime.ContainerKiller); ok {
		return k.KillContainer(ctx, pod, c, grace)
	}
	one := runtime.Pod{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace, Containers: []*runtime.Container{&c}}
	return a.cfg.Runtime.KillPod(ctx, pod, one, grace)
}

// markStartupPending returns rs with StartupPending set on the running
// sidecars whose startup probe has not passed, so that ComputePodActions
// holds what follows them, as the kubelet does. What it changes is copied:
// rs may be the cache's.
func (a *Agent) markStartupPending(pod *v1.Pod, rs *runtime.PodStatus) *runtime.PodStatus {
	if rs == nil {
		return rs
	}
	var out *runtime.PodStatus
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.StartupProbe == nil || !podutil.IsRestartableInitContainer(c) {
			continue
		}
		for j, cs := range rs.ContainerStatuses {
			if cs.Name != c.Name || cs.State != runtime.ContainerStateRunning {
				continue
			}
			if r, _ := a.prober.Result(prober.Startup, cs.ID); r == prober.Success {
				continue
			}
			if out == nil {
				cp := *rs
				cp.ContainerStatuses = slices.Clone(rs.ContainerStatuses)
				out = &cp
			}
			pending := *cs
			pending.StartupPending = true
			out.ContainerStatuses[j] = &pending
		}
	}
	if out == nil {
		return rs
	}
	return out
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

// restarts reports whether a regular container killed by a probe is
// started again: its own restart policy, else the pod's, is not Never.
func restarts(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return pod.Spec.RestartPolicy != v1.RestartPolicyNever
}

// containerEvent records an event on a container of pod, as the kubelet's
// container references do.
func (a *Agent) containerEvent(pod *v1.Pod, name string, eventType, reason, msg string) {
	ref := runtime.ContainerRef(pod, name)
	if ref == nil {
		return
	}
	if err := safeevent.Eventf(a.cfg.Recorder, ref, eventType, reason, "%s", msg); err != nil {
		a.log.Error(err, "Cannot record event", "pod", podutil.FullName(pod), "reason", reason)
	}
}
