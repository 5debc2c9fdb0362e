package prober

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// The kubelet's defaults for probe fields left at zero.
const (
	defaultPeriod           = 10 * time.Second
	defaultTimeout          = time.Second
	defaultSuccessThreshold = 1
	defaultFailureThreshold = 3
)

// spec is a probe's timing with defaults filled, and why the probe cannot
// run if it is invalid.
type spec struct {
	initialDelay     time.Duration
	period, timeout  time.Duration
	success, failure int
	invalid          error
}

func newSpec(t ProbeType, p *v1.Probe) spec {
	s := spec{
		initialDelay: time.Duration(p.InitialDelaySeconds) * time.Second,
		period:       time.Duration(p.PeriodSeconds) * time.Second,
		timeout:      time.Duration(p.TimeoutSeconds) * time.Second,
		success:      int(p.SuccessThreshold),
		failure:      int(p.FailureThreshold),
	}
	var problems []string
	var handlers []string
	if p.Exec != nil {
		handlers = append(handlers, "exec")
	}
	if p.HTTPGet != nil {
		handlers = append(handlers, "httpGet")
	}
	if p.TCPSocket != nil {
		handlers = append(handlers, "tcpSocket")
	}
	if p.GRPC != nil {
		handlers = append(handlers, "grpc")
	}
	switch len(handlers) {
	case 0:
		problems = append(problems, "no handler: set one of exec, httpGet, tcpSocket or grpc")
	case 1:
	default:
		problems = append(problems, fmt.Sprintf("%d handlers (%s): set exactly one", len(handlers), strings.Join(handlers, ", ")))
	}
	for _, f := range []struct {
		name string
		v    int32
	}{{"initialDelaySeconds", p.InitialDelaySeconds}, {"periodSeconds", p.PeriodSeconds}, {"timeoutSeconds", p.TimeoutSeconds},
		{"successThreshold", p.SuccessThreshold}, {"failureThreshold", p.FailureThreshold}} {
		if f.v < 0 {
			problems = append(problems, fmt.Sprintf("%s is negative (%d)", f.name, f.v))
		}
	}
	if p.TerminationGracePeriodSeconds != nil && *p.TerminationGracePeriodSeconds <= 0 {
		problems = append(problems, fmt.Sprintf("terminationGracePeriodSeconds must be positive (%d)", *p.TerminationGracePeriodSeconds))
	}
	if t != Readiness && p.SuccessThreshold > 1 {
		problems = append(problems, fmt.Sprintf("successThreshold must be 1 for %s probes (%d)", strings.ToLower(t.String()), p.SuccessThreshold))
	}
	if len(problems) > 0 {
		s.invalid = fmt.Errorf("invalid %s probe: %s", strings.ToLower(t.String()), strings.Join(problems, "; "))
	}
	if s.initialDelay < 0 {
		s.initialDelay = 0
	}
	if s.period <= 0 {
		s.period = defaultPeriod
	}
	if s.timeout <= 0 {
		s.timeout = defaultTimeout
	}
	if s.success <= 0 {
		s.success = defaultSuccessThreshold
	}
	if s.failure <= 0 {
		s.failure = defaultFailureThreshold
	}
	return s
}

// worker probes one container of a pod with one probe type, as the
// kubelet's prober worker: every period, once the container runs, its
// initial delay has passed and (but for the startup probe) it has started.
type worker struct {
	m         *Manager
	pod       *v1.Pod
	container *v1.Container // in pod.Spec
	sidecar   bool
	typ       ProbeType
	probe     *v1.Probe
	spec      spec
	// initial is the result of a new container instance before any verdict.
	initial   Result
	triggerCh chan struct{}
	cancel    context.CancelFunc // set when started, under m.mu

	// The rest belongs to the worker's goroutine.
	cid    runtime.ContainerID
	cidStr string
	last   Result
	run    int
	onHold bool
	cmd    []string // the exec command, expanded
	met    *workerMetrics
}

func newWorker(m *Manager, pod *v1.Pod, c *v1.Container, sidecar bool, t ProbeType, p *v1.Probe) *worker {
	w := &worker{m: m, pod: pod, container: c, sidecar: sidecar, typ: t, probe: p, spec: newSpec(t, p),
		triggerCh: make(chan struct{}, 1)}
	w.met = m.metrics.forWorker(w)
	switch t {
	case Readiness:
		w.initial = Failure
	case Liveness:
		w.initial = Success
	default:
		w.initial = Unknown
	}
	return w
}

// stop ends the worker; m.mu is held. A worker that never started is
// forgotten at once.
func (w *worker) stop() {
	if w.cancel != nil {
		w.cancel()
		return
	}
	delete(w.m.workers, workerKey{w.pod.UID, w.container.Name, w.typ})
	w.met.delete(w)
}

// trigger asks for a probe now; it never blocks.
func (w *worker) trigger() {
	select {
	case w.triggerCh <- struct{}{}:
	default:
	}
}

func (w *worker) runLoop(ctx context.Context) {
	defer w.m.removeWorker(w)
	defer w.met.delete(w)
	defer func() {
		if !w.cid.IsEmpty() {
			w.m.results.remove(w.typ, w.cid)
		}
	}()
	clk := w.m.clock
	// Workers created right after start (pods found running) spread out.
	if clk.Since(w.m.started) < w.spec.period {
		if d := w.m.jitter(w.spec.period); d > 0 {
			t := clk.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
	}
	t := clk.NewTicker(w.spec.period)
	defer t.Stop()
	for w.doProbe(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-w.triggerCh:
		}
	}
}

// doProbe probes once if due and records the verdict once a threshold is
// reached. It returns whether the worker should go on.
func (w *worker) doProbe(ctx context.Context) (keepGoing bool) {
	defer func() {
		if p := recover(); p != nil {
			w.m.log.Error(fmt.Errorf("panic: %v", p), "Probe worker panicked", "pod", podRef(w.pod), "container", w.container.Name, "probe", w.typ)
			keepGoing = true
		}
	}()
	if ctx.Err() != nil {
		return false
	}
	st, ok := w.m.status.SharedPodStatus(w.pod.UID)
	if !ok {
		return true // not synced yet, or gone
	}
	if st.Phase == v1.PodFailed || st.Phase == v1.PodSucceeded {
		return false
	}
	c := containerStatus(st.ContainerStatuses, w.container.Name)
	if c == nil {
		c = containerStatus(st.InitContainerStatuses, w.container.Name)
		if c == nil {
			return true // not created yet
		}
	}
	if w.cidStr != c.ContainerID {
		id, err := runtime.ParseContainerID(c.ContainerID)
		if err != nil {
			return true
		}
		if !w.cid.IsEmpty() {
			w.m.results.remove(w.typ, w.cid)
		}
		w.cid, w.cidStr = id, c.ContainerID
		w.m.results.init(w.typ, w.cid, w.initial)
		// A new instance starts afresh (the kubelet keeps the run count
		// across instances; a threshold is about one instance).
		w.onHold, w.last, w.run = false, Unknown, 0
	}
	if w.onHold {
		return true
	}
	if c.State.Running == nil {
		w.m.results.set(w.typ, w.cid, w.pod.UID, Failure)
		// A container that will not run again (by its restart rules and
		// policies) needs no more probing.
		return c.State.Terminated == nil || w.sidecar ||
			podutil.ContainerShouldRestart(w.container, &w.pod.Spec, c.State.Terminated.ExitCode)
	}
	if w.pod.DeletionTimestamp != nil && (w.typ == Liveness || w.typ == Startup) {
		// Graceful deletion: no restarts any more.
		w.m.results.set(w.typ, w.cid, w.pod.UID, Success)
		return false
	}
	if w.m.clock.Since(c.State.Running.StartedAt.Time) < w.spec.initialDelay {
		return true
	}
	started := c.Started != nil && *c.Started
	if started == (w.typ == Startup) {
		// The startup probe stops once started; the others wait for it.
		return true
	}

	select {
	case w.m.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	var start time.Time
	if w.met != nil {
		start = w.m.clock.Now()
	}
	res, err := w.m.probe(ctx, w, st.PodIP)
	<-w.m.sem
	if w.met != nil && ctx.Err() == nil {
		w.met.observe(res, err, w.m.clock.Since(start).Seconds())
	}
	if err != nil {
		return ctx.Err() == nil // an error is no verdict
	}

	if w.last == res {
		w.run++
	} else {
		w.last, w.run = res, 1
	}
	if (res == Failure && w.run < w.spec.failure) || (res == Success && w.run < w.spec.success) {
		return true
	}
	w.m.results.set(w.typ, w.cid, w.pod.UID, res)
	if (w.typ == Liveness && res == Failure) || w.typ == Startup {
		// The container will be restarted (or has started): nothing more
		// to probe until a new instance.
		w.onHold, w.run = true, 0
	}
	return true
}

func containerStatus(statuses []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name && statuses[i].ContainerID != "" {
			return &statuses[i]
		}
	}
	return nil
}

func podRef(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
