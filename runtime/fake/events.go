package fake

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// watcher is one WatchContainerEvents stream.
type watcher struct {
	ch     chan runtime.ContainerEvent
	done   chan struct{} // closed with ch, ends the ctx goroutine
	closed bool
}

var _ runtime.ContainerEventer = (*Runtime)(nil)

// WatchContainerEvents streams container events (created, started, stopped,
// deleted; a removed pod's sandboxes are deleted too, as containerd 2.x
// reports them), each with the pod's status right after the change, until ctx
// ends or the stream breaks: a consumer that falls Config.EventBuffer events
// behind, or BreakContainerEvents. The channel is closed then. A programmed
// exit is reported at its time on the clock while a stream is open (or when
// a call first observes it, whichever comes first), as a real runtime
// reports an exit when it happens; seeding with AddRunningPod reports
// nothing.
func (r *Runtime) WatchContainerEvents(ctx context.Context) (<-chan runtime.ContainerEvent, error) {
	if err := r.enter(ctx, mWatchContainerEvents, ""); err != nil {
		return nil, err
	}
	w := &watcher{ch: make(chan runtime.ContainerEvent, r.eventBuffer), done: make(chan struct{})}
	r.mu.Lock()
	r.watchers = append(r.watchers, w)
	// Exits programmed before the stream opened are timed now.
	now := r.clock.Now()
	for _, p := range r.pods {
		for _, c := range p.containers {
			r.scheduleExit(p, c, now)
		}
	}
	r.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-w.done:
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.dropWatcher(w)
	}()
	return w.ch, nil
}

// BreakContainerEvents closes every event stream, as a runtime restart
// would, so that consumers fall back to relisting.
func (r *Runtime) BreakContainerEvents() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.watchers) > 0 {
		r.dropWatcher(r.watchers[0])
	}
}

// dropWatcher closes w's stream and forgets it; r.mu must be held.
func (r *Runtime) dropWatcher(w *watcher) {
	if w.closed {
		return
	}
	w.closed = true
	close(w.ch)
	close(w.done)
	for i, x := range r.watchers {
		if x == w {
			r.watchers = append(r.watchers[:i], r.watchers[i+1:]...)
			break
		}
	}
}

// emit reports a change of c to every watcher; a watcher whose buffer is
// full loses its stream. r.mu must be held.
func (r *Runtime) emit(p *podState, c *container, typ runtime.ContainerEventType) {
	r.emitID(p, c.id, typ)
}

// emitID reports a change of the container or sandbox id; r.mu must be
// held.
func (r *Runtime) emitID(p *podState, id runtime.ContainerID, typ runtime.ContainerEventType) {
	r.notifyChanged()
	if len(r.watchers) == 0 {
		return
	}
	now := r.clock.Now()
	st := &runtime.PodStatus{ID: p.uid, TimeStamp: now}
	r.snapshot(p, st)
	ev := runtime.ContainerEvent{ContainerID: id, Type: typ, PodUID: p.uid, CreatedAt: now, PodStatus: st}
	for _, w := range append([]*watcher(nil), r.watchers...) {
		select {
		case w.ch <- ev:
		default:
			r.log.V(2).Info("event stream overflowed, closing it")
			r.dropWatcher(w)
		}
	}
}

// scheduleExit times c's programmed exit on the clock, once, if a stream is
// open to report it; r.mu must be held.
func (r *Runtime) scheduleExit(p *podState, c *container, now time.Time) {
	clk, ok := r.clock.(clock.WithDelayedExecution)
	if !ok || len(r.watchers) == 0 || c.exitAt.IsZero() || c.exitScheduled || c.state != runtime.ContainerStateRunning {
		return
	}
	c.exitScheduled = true
	// A fake clock runs the function inside Step with its lock held, and
	// settling reads the clock: settle on a goroutine of its own.
	clk.AfterFunc(c.exitAt.Sub(now), func() {
		go func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			c.exitScheduled = false
			if !p.removed {
				r.settle(p, r.clock.Now())
			}
		}()
	})
}
