package simclient

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// watcher is one watch: events are queued without bound (a write never
// waits for a reader) and the request's goroutine writes them out.
type watcher struct {
	f *filter

	mu     sync.Mutex
	queue  []event
	closed bool
	wake   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func newWatcher(f *filter) *watcher {
	return &watcher{f: f, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// send queues ev as this watch sees it; the server's mu is held. As the
// apiserver's watch cache, an object that starts matching the selectors
// comes as Added and one that stops matching as Deleted.
func (w *watcher) send(ev event) {
	now := ev.typ != watch.Deleted && w.f.matches(ev.obj)
	was := ev.old != nil && w.f.matches(ev.old)
	switch {
	case ev.typ == watch.Deleted:
		if !was && !w.f.matches(ev.obj) {
			return
		}
	case ev.typ == watch.Modified && now && !was:
		ev.typ = watch.Added
	case ev.typ == watch.Modified && !now && was:
		ev.typ = watch.Deleted
	case !now:
		return
	}
	w.push(ev)
}

func (w *watcher) push(ev event) {
	w.mu.Lock()
	if !w.closed {
		w.queue = append(w.queue, ev)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// take returns the queued events.
func (w *watcher) take() []event {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue
	w.queue = nil
	return q
}

func (w *watcher) stop() {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed, w.queue = true, nil
		w.mu.Unlock()
		close(w.done)
	})
}

// bookmark is the watch-list's end of initial events, or a plain bookmark.
func bookmark(rv uint64) event {
	return event{typ: watch.Bookmark, rv: rv}
}

var _ = runtime.Object(nil)
