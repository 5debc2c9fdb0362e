package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/prober"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// generate computes pod's API status from the runtime's view, on top of the
// status the agent last set (or the pod's own).
func (a *Agent) generate(pod *v1.Pod, rs *runtime.PodStatus, terminal bool) v1.PodStatus {
	old := &pod.Status
	if st, ok := a.status.SharedPodStatus(pod.UID); ok {
		old = st // read only: GeneratePodStatus does not modify it
	}
	if a.owner {
		st := a.ownedStatus(pod, rs, old)
		a.failPastDeadline(pod, &st)
		return st
	}
	if rs == nil {
		rs = &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	st := status.GeneratePodStatus(pod, rs, old, status.GenerateOptions{
		Reasons: a.reasons, BackOff: a.backoff, HostIPs: a.cfg.NodeIPs, PodIsTerminal: terminal, Probes: (*storedProbes)(a),
	})
	a.failPastDeadline(pod, &st)
	return st
}

// SyncPod sets the pod's API status, then moves the pod one step towards its
// spec on the runtime. A pod whose status is terminal is done.
func (s *syncer) SyncPod(ctx context.Context, _ podworkers.UpdateType, pod, _ *v1.Pod, rs *runtime.PodStatus) (bool, error) {
	a := (*Agent)(s)
	st := a.generate(pod, rs, false)
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
		a.setStatus(pod, st)
		return true, nil
	}
	// The pod's first status can wait for the runtime's SyncPod, so that
	// its first write says what the sync did, not a Pending written just
	// before (two apiserver writes a pod). A status owner that does not
	// have the pod yet reports it from within its SyncPod (a provider's
	// CreatePod and NotifyPods): its status always waits. A runtime's
	// waits up to Config.FirstStatusDelay.
	synced := false // the runtime's SyncPod ran
	var held *heldStatus
	switch {
	case a.owner && (rs == nil || rs.APIStatus == nil):
		held = a.holdFirstStatus(pod, st, 0)
	case !a.owner && a.cfg.FirstStatusDelay > 0 && !a.hasStatus(pod.UID):
		held = a.holdFirstStatus(pod, st, a.cfg.FirstStatusDelay)
	default:
		a.setStatus(pod, st)
	}
	if held != nil {
		defer func() { held.release(ctx, synced) }()
	}
	if err := a.runtimeError(); err != nil {
		return false, fmt.Errorf("%w: %w", podworkers.ErrTransient, err)
	}
	// As the kubelet: while the network is not ready, only pods on the
	// host's network start; the others wait (and pods stop as usual).
	if err := a.networkError(); err != nil && !pod.Spec.HostNetwork {
		if a.cfg.Recorder != nil {
			a.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, "NetworkNotReady", "network is not ready: %v", err)
		}
		return false, fmt.Errorf("%w: network is not ready: %w", podworkers.ErrTransient, err)
	}
	if !a.owner { // a status owner's readiness is its own
		a.prober.AddPod(pod)
	}
	rs, err := a.killUnhealthy(ctx, pod, rs)
	if err != nil {
		return false, err
	}
	rs = a.markStartupPending(pod, rs)
	rctx, done := a.runtimeContext(ctx)
	res := a.cfg.Runtime.SyncPod(rctx, pod, rs, a.pullSecrets(ctx, pod), a.backoff)
	done()
	synced = true
	if a.metrics != nil {
		a.metrics.syncResult(pod, &res)
	}
	a.reasons.Update(pod.UID, res)
	if a.cfg.RelistOnRequest && a.evented == nil && startedContainers(res) {
		// The relist that sees the start comes now rather than up to
		// RelistPeriod later: the Running status is written that much
		// sooner (an evented PLEG streams the start instead).
		a.pleg.RequestRelist()
	}
	return false, syncError(res)
}

// syncError is the error a sync with result res hands the pod workers,
// which decides when the pod is due again: nil (the resync interval), a
// back-off-only failure as podworkers.RetryAfter the earliest end of its
// crash-loop and image pull back-offs (ErrTransient, TransientBackOff, if a
// runtime's back-off does not say when it ends: runtime.BackOffError), any
// other failure as it is (Config.SyncErrorBackOff).
func syncError(res runtime.PodSyncResult) error {
	err := res.Error()
	if err == nil || !onlyBackOff(res) {
		return err
	}
	// Containers wait out their back-off: look again exactly when the
	// first back-off ends (a crash loop's as the kubelet's BackoffError,
	// without its jitter; an image pull's when the pull may be tried,
	// where the kubelet waits for its resync), so restarts and pulls keep
	// their rhythm, and not every TransientBackOff meanwhile, each sync a
	// BackOff event (an apiserver write). The status this sync stored
	// already says CrashLoopBackOff or ImagePullBackOff
	// (GenerateOptions.BackOff).
	err = fmt.Errorf("%w: %w", podworkers.ErrTransient, err)
	if left, ok := backOffLeft(res); ok {
		return podworkers.RetryAfter(err, left)
	}
	return err
}

// runtimeContext returns the context of the runtime's SyncPod: ctx's
// values without its cancellation, ended when Run ends (RunOnce: ctx
// itself). The pod workers cancel a pod's sync when the pod is deleted;
// the kubelet, too, hands its runtime's SyncPod context.WithoutCancel, since
// a RunPodSandbox or CreateContainer cut off in flight is work the runtime
// has done and throws away. Under a churn of short-lived pods on a busy
// containerd that left almost every sandbox unfinished (5 pods a second,
// each deleted 6s after its creation: 1,500 RunPodSandbox and 54 containers
// started in 5 minutes, where the kubelet started 493 of its 493). The
// kill that follows the deletion waits for this sync, as the kubelet's.
func (a *Agent) runtimeContext(ctx context.Context) (context.Context, func()) {
	life := a.life.Load()
	if life == nil {
		return ctx, func() {}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(*life, cancel)
	return rctx, func() { stop(); cancel() }
}

// hasStatus reports whether the agent has set a status for the pod.
func (a *Agent) hasStatus(uid types.UID) bool {
	_, ok := a.status.SharedPodStatus(uid)
	return ok
}

// heldStatus is a pod's first status, held back while its first sync
// runs: until the sync ends, or until a delay ends if one is given.
type heldStatus struct {
	a     *Agent
	pod   *v1.Pod
	st    v1.PodStatus
	timer clock.Timer // nil: held until release
	mu    sync.Mutex
	set   bool // the held status was set (the delay ended first)
}

func (a *Agent) holdFirstStatus(pod *v1.Pod, st v1.PodStatus, delay time.Duration) *heldStatus {
	h := &heldStatus{a: a, pod: pod, st: st}
	if delay > 0 {
		// The callback does not read h.timer: no lock is needed around
		// its assignment (and a clock that runs callbacks inline cannot
		// deadlock).
		h.timer = a.cfg.Clock.AfterFunc(delay, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if !h.set {
				h.set = true
				h.a.setStatus(h.pod, h.st)
			}
		})
	}
	return h
}

// release ends the hold when the sync ends: the status is generated again
// from the runtime if its SyncPod ran (for a status owner, if it reports
// the pod by then), so that the first write says what the sync did. The
// runtime is read outside the lock (a held status due meanwhile is not
// kept waiting on it) and with the runtime's context (a deletion cancels
// ctx, not the sync's report); the status is set under it, so that a held
// status set late cannot follow the fresh one.
func (h *heldStatus) release(ctx context.Context, synced bool) {
	if h.timer != nil {
		h.timer.Stop()
	}
	st := h.st
	if synced {
		rctx, done := h.a.runtimeContext(ctx)
		fresh, err := h.a.cfg.Runtime.GetPodStatus(rctx, h.pod.UID, h.pod.Name, h.pod.Namespace)
		done()
		if err == nil && (!h.a.owner || fresh.APIStatus != nil) {
			st = h.a.generate(h.pod, fresh, false)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.set = true
	h.a.setStatus(h.pod, st)
}

// setStatus hands a pod's new status to the status manager.
func (a *Agent) setStatus(pod *v1.Pod, st v1.PodStatus) {
	if a.metrics != nil {
		old, _ := a.status.SharedPodStatus(pod.UID)
		a.metrics.statusChanged(pod, old, &st, a.cfg.Clock.Now())
	}
	a.storeStatus(pod, st)
}

// storeStatus stores a pod's status generated by generate, then asks the
// readiness workers that status wants probed now.
func (a *Agent) storeStatus(pod *v1.Pod, st v1.PodStatus) {
	a.status.SetPodStatus(pod, st)
	a.probeMu.Lock()
	names := a.probeNow[pod.UID]
	delete(a.probeNow, pod.UID)
	a.probeMu.Unlock()
	for _, name := range names {
		a.prober.TriggerReadiness(pod.UID, name)
	}
}

// storedProbes is the prober as status generation sees it. A readiness
// worker reads the container (running, its ID) and the pod IP from the
// stored status, so the workers the status asks to probe now (no verdict
// yet, or a failure: prober.Manager.Ready) are asked once it is stored,
// by storeStatus: asked while it is generated, a worker may find the
// container not running yet and wait a whole period, or not, as
// goroutines happen to run (a pod Ready in the instant its container
// started or a period later, on virtual time).
type storedProbes Agent

func (p *storedProbes) Started(podUID types.UID, name, containerID string) bool {
	return p.prober.Started(podUID, name, containerID)
}

func (p *storedProbes) Ready(podUID types.UID, name, containerID string) bool {
	id, err := runtime.ParseContainerID(containerID)
	if err != nil {
		return false
	}
	r, _ := p.prober.Result(prober.Readiness, id)
	if r != prober.Success {
		p.probeMu.Lock()
		if p.probeNow == nil {
			p.probeNow = make(map[types.UID][]string)
		}
		if !slices.Contains(p.probeNow[podUID], name) {
			p.probeNow[podUID] = append(p.probeNow[podUID], name)
		}
		p.probeMu.Unlock()
	}
	return r == prober.Success
}

// relistForWaiter asks for a relist (with Config.RelistOnRequest) when a
// pod worker waits for status newer than its last sync, which the periodic relist would give up to
// RelistPeriod later (the kubelet's wait). An evented PLEG declares the
// cache current on its own.
func (a *Agent) relistForWaiter() {
	if a.cfg.RelistOnRequest && a.evented == nil && a.pleg != nil {
		a.pleg.RequestRelist()
	}
}

// startedContainers reports whether res started a container.
func startedContainers(res runtime.PodSyncResult) bool {
	for _, r := range res.SyncResults {
		if r.Error == nil && (r.Action == runtime.StartContainer || r.Action == runtime.InitContainer) {
			return true
		}
	}
	return false
}

// backOffLeft is the least wait left of res's back-offs (crash loops,
// image pulls: runtime.BackOffRemaining), false if a failed step does not
// say (a runtime's pull back-off without runtime.BackOffError).
func backOffLeft(res runtime.PodSyncResult) (time.Duration, bool) {
	least, ok := time.Duration(0), false
	for _, r := range res.SyncResults {
		if r.Error == nil {
			continue
		}
		left, says := runtime.BackOffRemaining(r.Error)
		if !says {
			return 0, false
		}
		if !ok || left < least {
			least, ok = left, true
		}
	}
	return least, ok
}

// onlyBackOff reports whether every failed step of res is a back-off.
func onlyBackOff(res runtime.PodSyncResult) bool {
	if res.SyncError != nil {
		return false
	}
	for _, r := range res.SyncResults {
		if r.Error != nil && !errors.Is(r.Error, runtime.ErrCrashLoopBackOff) && !errors.Is(r.Error, runtime.ErrImagePullBackOff) {
			return false
		}
	}
	return true
}

// SyncTerminatingPod stops the pod's containers within gracePeriod and records
// the final status once none runs.
func (s *syncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, rs *runtime.PodStatus, gracePeriod *int64, fn func(*v1.PodStatus)) error {
	a := (*Agent)(s)
	a.prober.StopLivenessAndStartup(pod) // nothing is restarted any more
	st := a.generate(pod, rs, false)
	if fn != nil {
		fn(&st)
	}
	a.storeStatus(pod, st)

	if err := a.cfg.Runtime.KillPod(ctx, pod, runningPod(a.cfg.Runtime.Type(), pod, rs), gracePeriod); err != nil {
		if ctx.Err() == nil { // a kill cut short by a newer update is no failure
			a.event(pod, v1.EventTypeWarning, runtime.EventFailedKillPod, "error killing pod: %v", err)
		}
		return fmt.Errorf("kill pod: %w", err)
	}
	// Confirm from the runtime itself: the cached status is older than the kill.
	after, err := a.cfg.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return fmt.Errorf("status after kill: %w", err)
	}
	if n := len(after.RunningContainerStatuses()); n > 0 {
		return fmt.Errorf("%d containers still running after kill", n)
	}
	st = a.generate(pod, after, true)
	if fn != nil {
		fn(&st)
	}
	a.storeStatus(pod, st)
	return nil
}

// SyncTerminatingRuntimePod stops a runtime pod no source knows, quickly.
func (s *syncer) SyncTerminatingRuntimePod(ctx context.Context, rp *runtime.Pod) error {
	a := (*Agent)(s)
	if err := a.cfg.Runtime.KillPod(ctx, nil, *rp, ptr.To[int64](1)); err != nil {
		return fmt.Errorf("kill orphaned pod: %w", err)
	}
	return nil
}

// SyncTerminatedPod releases a stopped pod's volumes (if the runtime sets
// them up), records its final status and lets the status manager delete it
// from the apiserver.
func (s *syncer) SyncTerminatedPod(_ context.Context, pod *v1.Pod, rs *runtime.PodStatus) error {
	a := (*Agent)(s)
	if vr, ok := a.cfg.Runtime.(volumeReleaser); ok {
		// As the kubelet waits for the unmount: a failure is retried.
		if err := vr.ReleaseVolumes(pod.UID); err != nil {
			return fmt.Errorf("release volumes: %w", err)
		}
	}
	a.storeStatus(pod, a.generate(pod, rs, true))
	a.status.TerminatePod(pod)
	a.reasons.Remove(pod.UID)
	a.prober.RemovePod(pod.UID)
	return nil
}

// volumeReleaser is implemented by runtimes that set up pods' volumes on
// the node (runtime/cri): tmpfs unmounted, contents and tokens dropped.
type volumeReleaser interface {
	ReleaseVolumes(uid types.UID) error
}

// runningPod is the runtime pod KillPod stops: the status's running (or
// possibly running) containers and its sandboxes, named after pod since a
// status from the cache may not carry the name.
func runningPod(runtimeType string, pod *v1.Pod, rs *runtime.PodStatus) runtime.Pod {
	var rp runtime.Pod
	if rs != nil {
		rp = rs.RunningPod(runtimeType)
	}
	rp.ID, rp.Name, rp.Namespace = pod.UID, pod.Name, pod.Namespace
	return rp
}
