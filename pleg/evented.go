package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// Defaults of EventedConfig.
const (
	DefaultStreamingRelistPeriod    = 5 * time.Minute
	DefaultStreamingRelistThreshold = 10 * time.Minute
	DefaultStreamRetryPeriod        = 10 * time.Second
	DefaultStreamRetryMaxPeriod     = 5 * time.Minute
	DefaultCacheUpdatePeriod        = 2 * time.Second
)

// EventedConfig configures an EventedPLEG.
type EventedConfig struct {
	// Generic relists: slowly while the event stream works, at its own
	// period (as configured when NewEvented is called) while it does not.
	// Required; the EventedPLEG runs it, so do not Run it yourself.
	Generic *GenericPLEG
	// Events is the runtime's container event stream. Required.
	Events runtime.ContainerEventer
	// StreamingRelistPeriod and StreamingRelistThreshold replace the
	// generic PLEG's period and threshold while the stream works. Defaults
	// 5m and 10m, as the kubelet's. A relist that fails or cannot inspect
	// a pod is still followed by the next at the normal period. Unless
	// Lossless, the period is at most CacheUpdatePeriod.
	StreamingRelistPeriod, StreamingRelistThreshold time.Duration
	// Lossless says the stream never drops an event: a runtime in the
	// same process whose every change is an event (a status owner, package
	// provider). The cache is then declared current every CacheUpdatePeriod
	// and on RequestCurrent, once the pending events are handled.
	//
	// A CRI runtime drops events for a subscriber that lags (containerd's
	// and fakecri's channels discard what does not fit), and a cache
	// declared current without them lets a pod worker act on status from
	// before its own sync and start a container a second time (the
	// kubelet's kubernetes/kubernetes#123087). So by default the cache is
	// declared current only by a relist, which runs every
	// CacheUpdatePeriod while the stream works: it lists, inspects only
	// the pods whose listing changed (what the stream missed, and what it
	// already reported) and then declares the cache current, as the
	// relist PLEG does. Events still arrive at once; the price is a
	// listing every CacheUpdatePeriod.
	Lossless bool
	// StreamRetryPeriod is the wait before a broken stream is opened again;
	// relisting runs at the normal period meanwhile. Default 10s. It doubles
	// with every failure in a row (a stream that fails to open, or breaks
	// before it delivered an event), up to StreamRetryMaxPeriod (default
	// 5m), so a runtime whose stream keeps failing is not hammered.
	StreamRetryPeriod, StreamRetryMaxPeriod time.Duration
	// CacheUpdatePeriod is how often, while the stream works, the cache is
	// declared current (Cache.UpdateTime), so that pod workers waiting for
	// status newer than their last sync wake up without an event of their
	// pod: by a relist, or if Lossless whenever no event is pending.
	// Default 2s, as the kubelet's.
	CacheUpdatePeriod time.Duration
	// Registerer, if set, receives the kubelet's evented PLEG metrics:
	// kubelet_evented_pleg_connection_success_count, _error_count and
	// _latency_seconds (from an event's creation to its handling). The
	// generic PLEG's own go to its Config.Registerer. nil: no metrics.
	Registerer prometheus.Registerer
}

// EventedPLEG generates pod lifecycle events from the runtime's container
// event stream (the CRI's GetContainerEvents), with the cache written from
// the status each event carries. A GenericPLEG relists slowly alongside as
// a safety net, and at its normal period whenever the stream is down. A
// runtime that cannot stream (ErrNotSupported) gets plain relisting.
//
// Events go to the generic PLEG's channel, so Watch returns the same
// channel; an event may be reported twice, by the stream and by a relist,
// which consumers tolerate as they tolerate resyncs.
type EventedPLEG struct {
	g      *GenericPLEG
	events runtime.ContainerEventer

	streamPeriod, streamThreshold time.Duration
	period, threshold             time.Duration
	retry, retryMax, cacheUpdate  time.Duration
	lossless                      bool
	// want carries RequestCurrent's requests to the consumer.
	want chan struct{}

	streaming atomic.Bool
	running   atomic.Bool

	metrics *streamMetrics // nil: none
}

// NewEvented returns an EventedPLEG for c, or an error wrapping
// runtime.ErrInvalidConfig.
func NewEvented(c EventedConfig) (*EventedPLEG, error) {
	if c.Generic == nil || c.Events == nil {
		return nil, fmt.Errorf("pleg: Generic and Events are required: %w", runtime.ErrInvalidConfig)
	}
	e := &EventedPLEG{
		g:         c.Generic,
		events:    c.Events,
		period:    time.Duration(c.Generic.period.Load()),
		threshold: time.Duration(c.Generic.threshold.Load()),
		want:      make(chan struct{}, 1),
	}
	for _, f := range []struct {
		name     string
		v        time.Duration
		dst      *time.Duration
		fallback time.Duration
	}{
		{"StreamingRelistPeriod", c.StreamingRelistPeriod, &e.streamPeriod, DefaultStreamingRelistPeriod},
		{"StreamingRelistThreshold", c.StreamingRelistThreshold, &e.streamThreshold, DefaultStreamingRelistThreshold},
		{"StreamRetryPeriod", c.StreamRetryPeriod, &e.retry, DefaultStreamRetryPeriod},
		{"StreamRetryMaxPeriod", c.StreamRetryMaxPeriod, &e.retryMax, DefaultStreamRetryMaxPeriod},
		{"CacheUpdatePeriod", c.CacheUpdatePeriod, &e.cacheUpdate, DefaultCacheUpdatePeriod},
	} {
		switch {
		case f.v < 0:
			return nil, fmt.Errorf("pleg: %s %v is negative: %w", f.name, f.v, runtime.ErrInvalidConfig)
		case f.v == 0:
			*f.dst = f.fallback
		default:
			*f.dst = f.v
		}
	}
	e.retryMax = max(e.retryMax, e.retry)
	e.lossless = c.Lossless
	if !e.lossless {
		e.streamPeriod = min(e.streamPeriod, e.cacheUpdate)
	}
	// While streaming, a relist that fails or cannot inspect a pod is
	// retried at the normal period: no event may come to refresh what it
	// left stale. Outside streaming the period is the normal one anyway.
	c.Generic.retryPeriod.Store(int64(e.period))
	var err error
	if e.metrics, err = newStreamMetrics(c.Registerer); err != nil {
		return nil, err
	}
	return e, nil
}

// Watch returns the generic PLEG's event channel, which both feed.
func (e *EventedPLEG) Watch() <-chan PodLifecycleEvent { return e.g.Watch() }

// Healthy returns an error if the event channel is full or the generic
// PLEG, with the threshold of the current mode, is unhealthy.
func (e *EventedPLEG) Healthy() error {
	if ch := e.g.events; len(ch) == cap(ch) {
		return fmt.Errorf("pleg: event channel is full with %d events", len(ch))
	}
	return e.g.Healthy()
}

// Streaming reports whether the event stream is up.
func (e *EventedPLEG) Streaming() bool { return e.streaming.Load() }

// Run runs the generic PLEG and the event stream until ctx ends, and
// returns nil once both have stopped. A second Run while one runs returns
// ErrAlreadyStarted.
func (e *EventedPLEG) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	defer e.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		e.setStreaming(false)
	}()
	wg.Go(func() {
		if err := e.g.Run(ctx); err != nil {
			e.g.log.Error(err, "Generic PLEG did not start")
		}
	})
	wait := e.retry
	for ctx.Err() == nil {
		ch, err := e.events.WatchContainerEvents(ctx)
		if errors.Is(err, runtime.ErrNotSupported) {
			e.g.log.Info("Runtime cannot stream container events; relisting only")
			<-ctx.Done()
			return nil
		}
		if m := e.metrics; m != nil {
			if err == nil {
				m.conns.Inc()
			} else {
				m.connErrs.Inc()
			}
		}
		if err == nil {
			e.setStreaming(true)
			// Catch what changed before the stream opened.
			_ = e.g.Relist(ctx)
			var handled int
			handled, err = e.consume(ctx, ch)
			e.setStreaming(false)
			if handled > 0 {
				wait = e.retry // the stream worked: start the back-off over
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		e.g.log.Error(err, "Container event stream is down; relisting at the normal period", "retryIn", wait)
		t := e.g.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
		}
		wait = min(2*wait, e.retryMax)
	}
	return nil
}

// setStreaming switches the generic PLEG between its slow and normal pace;
// the switch to normal relists at once if a normal period has passed.
func (e *EventedPLEG) setStreaming(on bool) {
	if e.streaming.Swap(on) == on {
		return
	}
	if on {
		_ = e.g.SetRelistDuration(e.streamPeriod, e.streamThreshold)
	} else {
		_ = e.g.SetRelistDuration(e.period, e.threshold)
	}
}

var errStreamClosed = errors.New("pleg: container event stream closed")

// consume handles events until the stream closes or ctx ends, and returns
// how many it handled.
func (e *EventedPLEG) consume(ctx context.Context, ch <-chan runtime.ContainerEvent) (int, error) {
	var tick <-chan time.Time // declares the cache current: Lossless only
	var want <-chan struct{}
	var t clock.Timer
	if e.lossless {
		t = e.g.clock.NewTimer(e.cacheUpdate)
		defer t.Stop()
		tick, want = t.C(), e.want
	}
	n := 0
	for {
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case ev, ok := <-ch:
			if !ok {
				return n, errStreamClosed
			}
			n++
			e.take(ev)
		case <-want:
			if err := e.declareCurrent(ch, &n); err != nil {
				return n, err
			}
		case <-tick:
			if err := e.declareCurrent(ch, &n); err != nil {
				return n, err
			}
			t.Reset(e.cacheUpdate)
		}
	}
}

// declareCurrent handles the events pending on a lossless stream and then
// declares the cache current as of before it looked: every event the
// runtime sent before then was pending, so a waiter can never read status
// older than an event not yet handled.
func (e *EventedPLEG) declareCurrent(ch <-chan runtime.ContainerEvent, n *int) error {
	now := e.g.clock.Now()
	for len(ch) > 0 {
		ev, ok := <-ch
		if !ok {
			return errStreamClosed
		}
		*n++
		e.take(ev)
	}
	e.g.cache.UpdateTime(now)
	return nil
}

// RequestCurrent asks, without waiting, that the cache be declared current
// as soon as the events already sent are handled, for a pod worker about to
// wait for status newer than its last sync: on a Lossless stream the
// worker then need not wait for the next CacheUpdatePeriod. Requests
// coalesce; it does nothing unless Lossless or while the stream is down.
func (e *EventedPLEG) RequestCurrent() {
	if !e.lossless {
		return
	}
	select {
	case e.want <- struct{}{}:
	default:
	}
}

// take handles one event from the stream.
func (e *EventedPLEG) take(ev runtime.ContainerEvent) {
	if m := e.metrics; m != nil && !ev.CreatedAt.IsZero() {
		m.latency.Observe(e.g.clock.Since(ev.CreatedAt).Seconds())
	}
	e.handle(ev)
}

// handle writes the status an event carries to the cache and sends the
// matching lifecycle events, as the kubelet's evented PLEG does: created
// sends nothing, started ContainerStarted, stopped ContainerDied, deleted
// ContainerDied and ContainerRemoved (a deleted sandbox deletes the pod from
// the cache). An event without a status is left to the next relist.
func (e *EventedPLEG) handle(ev runtime.ContainerEvent) {
	st := ev.PodStatus
	if st == nil || ev.PodUID == "" {
		e.g.log.V(2).Info("Container event without pod status; leaving it to the relist", "containerID", ev.ContainerID.String())
		return
	}
	uid := ev.PodUID
	cid := ev.ContainerID.String()
	var old *runtime.PodStatus
	m := e.g.metrics
	if m != nil {
		old, _ = e.g.cache.Get(uid)
	}
	if ev.Type == runtime.ContainerDeletedEvent {
		sandbox := false
		for _, s := range st.SandboxStatuses {
			sandbox = sandbox || s.ID == ev.ContainerID.ID
		}
		if sandbox {
			e.g.cache.Delete(uid)
			st = nil
		} else {
			e.g.cache.Set(uid, e.g.keepIPs(uid, st), nil, ev.CreatedAt)
		}
		if m != nil {
			m.addStatus(old, -1)
			m.addStatus(st, 1)
		}
		e.send(PodLifecycleEvent{ID: uid, Type: ContainerDied, ContainerID: cid})
		e.send(PodLifecycleEvent{ID: uid, Type: ContainerRemoved, ContainerID: cid})
		return
	}
	if !e.g.cache.Set(uid, e.g.keepIPs(uid, st), nil, ev.CreatedAt) {
		return // the cache holds newer status; the event is stale
	}
	if m != nil {
		m.addStatus(old, -1)
		m.addStatus(st, 1)
	}
	switch ev.Type {
	case runtime.ContainerStartedEvent:
		e.send(PodLifecycleEvent{ID: uid, Type: ContainerStarted, ContainerID: cid})
	case runtime.ContainerStoppedEvent:
		e.send(PodLifecycleEvent{ID: uid, Type: ContainerDied, ContainerID: cid})
	}
}

func (e *EventedPLEG) send(ev PodLifecycleEvent) {
	select {
	case e.g.events <- ev:
	default:
		if m := e.g.metrics; m != nil {
			m.discard.Inc()
		}
		e.g.log.Error(nil, "Event channel is full; event dropped", "podUID", ev.ID, "type", ev.Type)
	}
}
