package agent

import (
	"context"
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
		OnUpdate:   a.applyProbeUpdate,
	})
}

// Prober returns the agent's prober, for a test or a server endpoint.
func (a *Agent) Prober() *prober.Manager { return a.prober }

// applyProbeUpdate applies a verdict of the prober's (its OnUpdate, in
// its goroutine), as the kubelet's sync loop does (prober.ApplyUpdate):
// readiness and startup go to the status manager, and the pod is synced,
// which kills a container that failed its liveness or startup probe.
func (a *Agent) applyProbeUpdate(ctx context.Context, u prober.Update) {
	if !prober.ApplyUpdate(a.status, u) {
		return
	}
	if pod, ok := a.pods.GetPodByUID(u.PodUID); ok {
		(*handler)(a).HandlePodSyncs(ctx, []*v1.Pod{pod})
	}
}

// killUnhealthy stops the running containers (and sidecars) of pod whose
// liveness or startup probe failed (prober's KillUnhealthy), as the
// kubelet's computePodActions, so that the runtime's SyncPod restarts
// them as the restart policy and back-off say. It records the Killing
// events a runtime does not, and returns the pod's status after the
// kills, or rs.
func (a *Agent) killUnhealthy(ctx context.Context, pod *v1.Pod, rs *runtime.PodStatus) (*runtime.PodStatus, error) {
	killed, err := a.prober.KillUnhealthy(ctx, a.cfg.Runtime, pod, rs)
	es, ok := a.cfg.Runtime.(runtime.EventSource)
	recorded := ok && es.RecordsEvents() // the runtime's Killing event says why
	for _, u := range killed {
		a.log.Info("Killed unhealthy container", "pod", podutil.FullName(pod), "container", u.Name, "reason", u.Message)
		if !recorded {
			a.containerEvent(pod, u.Name, v1.EventTypeNormal, ReasonKilling, u.Message)
		}
	}
	if err != nil {
		return rs, err
	}
	if len(killed) == 0 {
		return rs, nil
	}
	// SyncPod decides on the restart from the state after the kill.
	return a.cfg.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
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
