package prober

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nodekit/nodekit/runtime"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
)

// outcome is what one probe run says, before thresholds: the kubelet's
// probe.Result.
type outcome uint8

const (
	outcomeUnknown outcome = iota
	outcomeSuccess
	outcomeWarning
	outcomeFailure
)

func (o outcome) String() string {
	switch o {
	case outcomeSuccess:
		return "success"
	case outcomeWarning:
		return "warning"
	case outcomeFailure:
		return "failure"
	}
	return "unknown"
}

// Event reasons, as the kubelet's.
const (
	ReasonUnhealthy    = "Unhealthy"
	ReasonProbeWarning = "ProbeWarning"
)

// maxRetries is how often a probe that errors (rather than fails) is run
// again at once, as the kubelet's maxProbeRetries.
const maxRetries = 3

// probe runs w's probe (retrying errors), records the kubelet's events and
// returns the result; an error means no verdict.
func (m *Manager) probe(ctx context.Context, w *worker, podIP string) (Result, error) {
	o, out, err := m.runRetried(ctx, w, podIP)
	if ctx.Err() != nil {
		// Cut short by the worker's stop (pod removed, terminating, Run
		// ending): the failed request or dial this leaves says nothing
		// about the container, so no verdict and no event. The kubelet's
		// stop lets a probe under way finish.
		return Failure, ctx.Err()
	}
	if err != nil {
		m.log.V(1).Info("Probe errored", "probe", w.typ, "pod", podRef(w.pod), "container", w.container.Name, "err", err.Error())
		m.event(w, ReasonUnhealthy, "%s probe errored and resulted in %s state: %s", w.typ, o, err)
		return Failure, err
	}
	switch o {
	case outcomeSuccess:
		return Success, nil
	case outcomeWarning:
		m.event(w, ReasonProbeWarning, "%s probe warning: %s", w.typ, out)
		return Success, nil
	case outcomeFailure:
		m.log.V(1).Info("Probe failed", "probe", w.typ, "pod", podRef(w.pod), "container", w.container.Name, "output", out)
		m.event(w, ReasonUnhealthy, "%s probe failed: %s", w.typ, out)
	}
	return Failure, nil
}

// runRetried runs w's probe, again at once while it errors, up to
// maxRetries times.
func (m *Manager) runRetried(ctx context.Context, w *worker, podIP string) (o outcome, out string, err error) {
	for i := 0; i < maxRetries; i++ {
		o, out, err = m.runProbe(ctx, w, podIP)
		if err == nil || w.spec.invalid != nil || ctx.Err() != nil {
			break
		}
	}
	return o, out, err
}

func (m *Manager) runProbe(ctx context.Context, w *worker, podIP string) (outcome, string, error) {
	if w.spec.invalid != nil {
		return outcomeUnknown, "", w.spec.invalid
	}
	p, timeout := w.probe, w.spec.timeout
	if p.Exec == nil {
		// A network probe's timeout also runs on the injected clock, so
		// that a probe waiting on a pod that does not answer (gRPC retries
		// a refused connection until its deadline) ends on virtual time.
		var cancel context.CancelFunc
		ctx, cancel = m.clockTimeout(ctx, timeout)
		defer cancel()
	}
	switch {
	case p.Exec != nil:
		return m.execProbe(ctx, w, timeout)
	case p.HTTPGet != nil:
		req, err := m.newHTTPRequest(ctx, p.HTTPGet, w.container, podIP)
		if err != nil {
			return outcomeUnknown, "", err
		}
		return m.httpProbe(req, timeout)
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, w.container)
		if err != nil {
			return outcomeUnknown, "", err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		if host == "" {
			return outcomeUnknown, "", errors.New("no host to probe: the pod has no IP yet and the probe sets no host")
		}
		return m.tcpProbe(ctx, host, port, timeout)
	default: // GRPC; newSpec made sure there is one handler
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return m.grpcProbe(ctx, podIP, service, int(p.GRPC.Port), timeout)
	}
}

// resolvePort returns the port a probe names, by number or by the name of
// one of the container's ports.
func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	port := p.IntValue()
	if p.Type == intstr.String {
		port = -1
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				port = int(cp.ContainerPort)
				break
			}
		}
		if port < 0 {
			// As the kubelet: maybe a number written as a string.
			n, err := strconv.Atoi(p.StrVal)
			if err != nil {
				return 0, fmt.Errorf("port %q not found in container %q", p.StrVal, c.Name)
			}
			port = n
		}
	}
	if port <= 0 || port > 65535 {
		return 0, fmt.Errorf("invalid port number: %d", port)
	}
	return port, nil
}

// event records an event on w's container, as the kubelet's container
// events (a reference with the container's field path).
func (m *Manager) event(w *worker, reason, format string, args ...any) {
	if m.recorder == nil {
		return
	}
	path := "spec.containers{" + w.container.Name + "}"
	if w.sidecar {
		path = "spec.initContainers{" + w.container.Name + "}"
	}
	ref := &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: w.pod.Namespace, Name: w.pod.Name,
		UID: w.pod.UID, ResourceVersion: w.pod.ResourceVersion, FieldPath: path}
	defer func() {
		if p := recover(); p != nil {
			m.log.Error(fmt.Errorf("panic: %v", p), "Event recorder panicked")
		}
	}()
	m.recorder.Eventf(ref, v1.EventTypeWarning, reason, format, args...)
}

// clockTimeout is ctx ended timeout from now on m's clock, when that is not
// the real clock (a fake, a simulation's virtual clock): a goroutine waits
// on the clock's timer and cancels ctx with context.DeadlineExceeded as its
// cause. On the real clock the probes' own timeouts, as the kubelet's,
// are all there is, and ctx is returned as it is.
func (m *Manager) clockTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	switch m.clock.(type) {
	case clock.RealClock, *clock.RealClock:
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t := m.clock.NewTimer(timeout)
	go func() {
		select {
		case <-t.C():
			cancel(context.DeadlineExceeded)
		case <-ctx.Done():
			t.Stop()
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// ProbeOnce runs probe p of container c (instance id) of pod once, now, as
// a worker would (the command's $(VAR) expanded from c's env, the
// timeout on the Manager's clock, an erroring probe retried three times),
// and returns the verdict and the probe's output (the body of a
// redirect's warning, an exec's output, a failure's message), recording
// no event and keeping no result: for a program that drives probes itself,
// or checks one by hand. podIP is where network probes without a host go.
// An error means no verdict: an invalid probe, or ctx ended.
func (m *Manager) ProbeOnce(ctx context.Context, t ProbeType, pod *v1.Pod, c *v1.Container, id runtime.ContainerID, p *v1.Probe, podIP string) (Result, string, error) {
	if pod == nil || c == nil || p == nil {
		return Failure, "", errors.New("prober: ProbeOnce needs a pod, a container and a probe")
	}
	w := newWorker(m, pod, c, false, t, p)
	w.cid = id
	o, out, err := m.runRetried(ctx, w, podIP)
	switch {
	case ctx.Err() != nil:
		return Failure, "", ctx.Err()
	case err != nil:
		return Failure, out, err
	case o == outcomeSuccess || o == outcomeWarning:
		return Success, out, nil
	}
	return Failure, out, nil
}
