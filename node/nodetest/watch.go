package nodetest

import (
	"context"
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// The Node events kept for watches that resume from a resourceVersion, and
// the events a watch holds for its reader before it is ended as a slow one.
const (
	historyLen = 1000
	watchBuf   = 256
)

// nodeEvent is one Node event of the history; obj is never modified.
type nodeEvent struct {
	rv  int
	typ watch.EventType
	obj *v1.Node
}

// nodeWatch is one open watch of Nodes.
type nodeWatch struct {
	f     *Fake
	sel   fields.Selector
	ch    chan watch.Event
	done  bool
	after func() bool // stops the context.AfterFunc that ends it with ctx
}

// List returns the Nodes opts.FieldSelector selects (only metadata.name
// may be selected on) at the current resourceVersion, whatever
// opts.ResourceVersion says. Label selectors are refused.
func (c *NodeClient) List(ctx context.Context, opts metav1.ListOptions) (*v1.NodeList, error) {
	a := Action{Verb: VerbList, Resource: "nodes", ResourceVersion: opts.ResourceVersion, FieldSelector: opts.FieldSelector}
	o, err := c.f.do(ctx, a, func() (any, error) {
		sel, err := nodeSelector(opts)
		if err != nil {
			return nil, err
		}
		list := &v1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(c.f.nextRV)}}
		for _, o := range c.f.objs["nodes"] {
			if n := o.(*v1.Node); nodeMatches(sel, n) {
				list.Items = append(list.Items, *n)
			}
		}
		return list, nil
	})
	if err != nil {
		return nil, err
	}
	return o.(*v1.NodeList), nil
}

// Watch watches the Nodes opts.FieldSelector selects (only metadata.name
// may be selected on), as the apiserver does: from opts.ResourceVersion
// "" or "0" the current Nodes come first as Added events; from a
// resourceVersion the events after it are replayed, or, when the history
// (the last 1000 Node events) no longer reaches back to it, an Error event
// with 410 Gone ("too old resource version") ends the watch. Every write
// of a Node (by a client, PutNode or Delete) is an event. A watch ends
// when ctx ends, on Stop, on CloseWatches or EndWatches, or when its
// reader falls 256 events behind; it never ends on its own
// (TimeoutSeconds is ignored) and sends no bookmarks.
func (c *NodeClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	a := Action{Verb: VerbWatch, Resource: "nodes", ResourceVersion: opts.ResourceVersion, FieldSelector: opts.FieldSelector}
	o, err := c.f.do(ctx, a, func() (any, error) {
		sel, err := nodeSelector(opts)
		if err != nil {
			return nil, err
		}
		return c.f.watchLocked(sel, opts.ResourceVersion)
	})
	if err != nil {
		return nil, err
	}
	w := o.(*nodeWatch)
	stop := context.AfterFunc(ctx, w.Stop)
	c.f.mu.Lock()
	w.after = stop
	c.f.mu.Unlock()
	return w, nil
}

// watchLocked opens a watch from rv; f.mu is held.
func (f *Fake) watchLocked(sel fields.Selector, rv string) (*nodeWatch, error) {
	w := &nodeWatch{f: f, sel: sel, ch: make(chan watch.Event, watchBuf)}
	f.watchers[w] = struct{}{}
	if rv == "" || rv == "0" {
		for _, o := range f.objs["nodes"] {
			if n := o.(*v1.Node); nodeMatches(sel, n) {
				w.sendLocked(watch.Added, n)
			}
		}
		return w, nil
	}
	from, err := strconv.Atoi(rv)
	if err != nil || from < 0 {
		delete(f.watchers, w)
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", rv))
	}
	if from < f.histFrom {
		w.endLocked(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, f.histFrom)))
		return w, nil
	}
	for _, ev := range f.history {
		if ev.rv > from && nodeMatches(sel, ev.obj) {
			w.sendLocked(ev.typ, ev.obj)
		}
	}
	return w, nil
}

// notifyLocked records a write of o (a Node: others have no watch) and
// sends it to the watches that select it; f.mu is held.
func (f *Fake) notifyLocked(resource string, typ watch.EventType, o any) {
	n, ok := o.(*v1.Node)
	if resource != "nodes" || !ok {
		return
	}
	rv, _ := strconv.Atoi(n.ResourceVersion)
	if len(f.history) == historyLen {
		f.histFrom = f.history[0].rv
		f.history = f.history[1:]
	}
	f.history = append(f.history, nodeEvent{rv: rv, typ: typ, obj: n})
	for w := range f.watchers {
		if nodeMatches(w.sel, n) {
			w.sendLocked(typ, n)
		}
	}
}

// sendLocked hands the watch's reader its own copy of n; a watch whose
// reader is too far behind is ended, as the apiserver ends a slow one.
func (w *nodeWatch) sendLocked(typ watch.EventType, n *v1.Node) {
	if w.done {
		return
	}
	select {
	case w.ch <- watch.Event{Type: typ, Object: n.DeepCopy()}:
	default:
		w.endLocked(nil)
	}
}

// endLocked ends the watch, with an Error event carrying err's status
// first if err is not nil; f.mu is held.
func (w *nodeWatch) endLocked(err error) {
	if w.done {
		return
	}
	if err != nil {
		st := apierrors.NewInternalError(err).ErrStatus
		if s, ok := err.(apierrors.APIStatus); ok {
			st = s.Status()
		}
		select {
		case w.ch <- watch.Event{Type: watch.Error, Object: &st}:
		default:
		}
	}
	w.done = true
	close(w.ch)
	delete(w.f.watchers, w)
	if w.after != nil {
		w.after()
	}
}

// ResultChan delivers the watch's events; it is closed when the watch ends.
func (w *nodeWatch) ResultChan() <-chan watch.Event { return w.ch }

// Stop ends the watch.
func (w *nodeWatch) Stop() {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	w.endLocked(nil)
}

// CloseWatches ends every open watch of Nodes without an error, as the
// apiserver ends one at its timeout; clients watch again.
func (f *Fake) CloseWatches() { f.EndWatches(nil) }

// EndWatches ends every open watch of Nodes with an Error event carrying
// err's status (apierrors.NewResourceExpired for the 410 Gone of a
// compacted history, NewInternalError ...), or, with nil, without one.
func (f *Fake) EndWatches(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for w := range f.watchers {
		w.endLocked(err)
	}
}

// Watches returns how many watches of Nodes are open.
func (f *Fake) Watches() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.watchers)
}

// Compact forgets the Node events so far, as etcd's compaction does: a
// watch from an earlier resourceVersion ends with 410 Gone.
func (f *Fake) Compact() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.history = nil
	f.histFrom = f.nextRV
}

// nodeSelector is opts' field selector; only metadata.name may be
// selected on, and labels not at all.
func nodeSelector(opts metav1.ListOptions) (fields.Selector, error) {
	if opts.LabelSelector != "" {
		return nil, apierrors.NewBadRequest("nodetest: label selectors are not supported")
	}
	sel, err := fields.ParseSelector(opts.FieldSelector)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	for _, r := range sel.Requirements() {
		if r.Field != "metadata.name" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("nodetest: field selector on %q is not supported", r.Field))
		}
	}
	return sel, nil
}

func nodeMatches(sel fields.Selector, n *v1.Node) bool {
	return sel.Matches(fields.Set{"metadata.name": n.Name})
}
