package sim

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// podWatch is one watch: events are queued without bound (a store write
// never waits for a reader) and a goroutine hands them to the reader.
type podWatch struct {
	s      *Store
	ns     string
	ls     labels.Selector
	fs     fields.Selector
	out    chan watch.Event
	done   chan struct{}
	stop   sync.Once
	mu     sync.Mutex
	queue  []watch.Event
	wake   chan struct{}
	timer  clock.Timer
	closed bool
	node   string // the spec.nodeName the field selector requires, if any
}

// watchPods starts a watch; s.mu is not held.
func (s *Store) watchPods(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	ls, fs, err := selectors(opts)
	if err != nil {
		return nil, err
	}
	w := &podWatch{s: s, ns: ns, ls: ls, fs: fs, out: make(chan watch.Event), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	s.mu.Lock()
	if rv := opts.ResourceVersion; rv != "" && rv != "0" {
		from, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			s.mu.Unlock()
			return nil, apierrors.NewBadRequest("invalid resourceVersion " + rv)
		}
		if !s.replayLocked(w, from) {
			s.mu.Unlock()
			return nil, apierrors.NewResourceExpired("too old resource version: " + rv)
		}
	} else {
		s.initialStateLocked(w)
	}
	if node, ok := fs.RequiresExactMatch("spec.nodeName"); ok && node != "" {
		w.node = node
		if s.nodeWatchers[node] == nil {
			s.nodeWatchers[node] = map[*podWatch]struct{}{}
		}
		s.nodeWatchers[node][w] = struct{}{}
	} else {
		s.watchers[w] = struct{}{}
	}
	s.mu.Unlock()
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		if c, ok := s.clock.(clock.WithDelayedExecution); ok {
			w.timer = c.AfterFunc(time.Duration(*opts.TimeoutSeconds)*time.Second, w.Stop)
		}
	}
	go w.run(ctx)
	return w, nil
}

// replayLocked queues the events after rv; false if history no longer
// reaches back to rv.
func (s *Store) replayLocked(w *podWatch, rv uint64) bool {
	if rv < s.histFrom {
		return false
	}
	n := len(s.history)
	for i := range n {
		ev := &s.history[(s.histPos+i)%n]
		if erv, _ := strconv.ParseUint(ev.Object.(*v1.Pod).ResourceVersion, 10, 64); erv > rv {
			w.send(ev.Event, ev.old)
		}
	}
	return true
}

// initialStateLocked queues a synthetic Added for every pod the watch
// selects, as the apiserver starts a watch without a resourceVersion (or
// from "0"): such a watcher learns the current state from the watch itself,
// and a pod written between its list and its watch is not lost. In name
// order, so seeded runs stay reproducible.
func (s *Store) initialStateLocked(w *podWatch) {
	var pods []*v1.Pod
	for _, p := range s.pods {
		if podMatches(p, w.ns, w.ls, w.fs) {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *v1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, p := range pods {
		w.send(watch.Event{Type: watch.Added, Object: p}, nil)
	}
}

// send queues ev as this watch sees it; the store's lock is held. As the
// apiserver's watch cache does, a pod that starts matching the selectors
// comes as Added and one that stops matching as Deleted.
func (w *podWatch) send(ev watch.Event, old *v1.Pod) {
	p := ev.Object.(*v1.Pod)
	now := podMatches(p, w.ns, w.ls, w.fs)
	was := old != nil && podMatches(old, w.ns, w.ls, w.fs)
	switch {
	case ev.Type == watch.Modified && now && !was:
		ev.Type = watch.Added
	case ev.Type == watch.Modified && !now && was:
		ev.Type = watch.Deleted
	case !now && (ev.Type != watch.Deleted || !was):
		return
	}
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

func (w *podWatch) run(ctx context.Context) {
	defer close(w.out)
	defer w.Stop()
	for {
		w.mu.Lock()
		q := w.queue
		w.queue = nil
		w.mu.Unlock()
		for _, ev := range q {
			// Each reader gets its own copy, as from a decoder.
			ev.Object = ev.Object.(*v1.Pod).DeepCopy()
			select {
			case w.out <- ev:
			case <-w.done:
				return
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-w.wake:
		case <-w.done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// Stop ends the watch; ResultChan is closed soon after.
func (w *podWatch) Stop() {
	w.stop.Do(func() {
		w.s.mu.Lock()
		delete(w.s.watchers, w)
		if w.node != "" {
			delete(w.s.nodeWatchers[w.node], w)
		}
		w.s.mu.Unlock()
		w.mu.Lock()
		w.closed, w.queue = true, nil
		w.mu.Unlock()
		if w.timer != nil {
			w.timer.Stop()
		}
		close(w.done)
	})
}

// ResultChan delivers the events.
func (w *podWatch) ResultChan() <-chan watch.Event { return w.out }

// stopWatches ends every watch, as an apiserver going away does.
func (s *Store) stopWatches() {
	s.mu.Lock()
	var all []*podWatch
	for w := range s.watchers {
		all = append(all, w)
	}
	for _, ws := range s.nodeWatchers {
		for w := range ws {
			all = append(all, w)
		}
	}
	s.mu.Unlock()
	for _, w := range all {
		w.Stop()
	}
}
