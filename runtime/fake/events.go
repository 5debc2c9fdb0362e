package fake

import (
	"context"

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
// deleted), each with the pod's status right after the change, until ctx
// ends or the stream breaks: a consumer that falls Config.EventBuffer events
// behind, or BreakContainerEvents. The channel is closed then. A programmed
// exit is reported when a call first observes it (any read does), not at the
// moment of the exit itself; seeding with AddRunningPod reports nothing.
func (r *Runtime) WatchContainerEvents(ctx context.Context) (<-chan runtime.ContainerEvent, error) {
	if err := r.enter(ctx, mWatchContainerEvents, ""); err != nil {
		return nil, err
	}
	w := &watcher{ch: make(chan runtime.ContainerEvent, r.eventBuffer), done: make(chan struct{})}
	r.mu.Lock()
	r.watchers = append(r.watchers, w)
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
	if len(r.watchers) == 0 {
		return
	}
	now := r.clock.Now()
	st := &runtime.PodStatus{ID: p.uid, TimeStamp: now}
	r.snapshot(p, st)
	ev := runtime.ContainerEvent{ContainerID: c.id, Type: typ, PodUID: p.uid, CreatedAt: now, PodStatus: st}
	for _, w := range append([]*watcher(nil), r.watchers...) {
		select {
		case w.ch <- ev:
		default:
			r.log.V(2).Info("event stream overflowed, closing it")
			r.dropWatcher(w)
		}
	}
}
