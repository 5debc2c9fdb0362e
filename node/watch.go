package node

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// The Node's watch, as client-go's reflector runs the kubelet's node
// informer: a failure backs off from 800ms doubling to 30s; each watch
// asks the apiserver to end it after 5 to 10 minutes, so that a watch on
// a dead connection does not last; a watch that ends within a second
// without an event counts as a failure.
const (
	watchBackoffInitial = 800 * time.Millisecond
	watchBackoffMax     = 30 * time.Second
	minWatchTimeout     = 5 * time.Minute
	shortWatch          = time.Second
)

// watchLoop keeps the Node held current until ctx ends, as the kubelet's
// node informer: it lists the Node (field selector metadata.name, first
// from the apiserver's cache, resourceVersion "0", then at the last
// resourceVersion seen, or from storage once that is too old) and watches
// it from the list's resourceVersion. A watch the apiserver ends is
// resumed at once from the last resourceVersion seen; after an error (a
// failed list or watch, an Error event such as 410 Gone, a watch ended at
// once) it backs off and lists again. The back-off starts over after a
// watch that delivered and ended without an error. A deleted Node is
// forgotten (the status loop registers it again).
func (c *Controller) watchLoop(ctx context.Context, w NodeWatcher) {
	sel := fields.OneTermEqualSelector("metadata.name", c.cfg.NodeName).String()
	list, listRV, rv := true, "0", ""
	var backoff time.Duration
	failed := func(msg string, err error) bool {
		backoff = nextBackoff(backoff, watchBackoffInitial, watchBackoffMax)
		c.cfg.Log.Error(err, msg, "node", c.cfg.NodeName, "retryIn", backoff)
		list = true
		return c.sleep(ctx, backoff)
	}
	for ctx.Err() == nil {
		if list {
			nodes, err := c.listNode(ctx, w, sel, listRV)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
					apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
					listRV = "" // from storage
				}
				if !failed("Failed to list the node", err) {
					return
				}
				continue
			}
			c.observeList(nodes)
			list, rv, listRV = false, nodes.ResourceVersion, nodes.ResourceVersion
			if listRV == "" {
				listRV = "0"
			}
		}
		timeout := int64((minWatchTimeout + rand.N(minWatchTimeout)).Seconds())
		wi, err := w.Watch(ctx, metav1.ListOptions{
			FieldSelector:       sel,
			ResourceVersion:     rv,
			AllowWatchBookmarks: true,
			TimeoutSeconds:      &timeout,
		})
		if err == nil && wi == nil {
			err = errors.New("watch returned nothing")
		}
		if err != nil {
			if ctx.Err() != nil || !failed("Failed to watch the node", err) {
				return
			}
			continue
		}
		started := c.cfg.Clock.Now()
		c.setWatching(true)
		end := c.consumeWatch(ctx, wi, rv)
		wi.Stop()
		c.setWatching(false)
		if ctx.Err() != nil {
			return
		}
		rv = end.rv
		if end.rv != "" {
			listRV = end.rv
		}
		switch {
		case end.err != nil:
			if !failed("The node's watch ended with an error", end.err) {
				return
			}
		case end.events == 0 && c.cfg.Clock.Since(started) < shortWatch:
			if !failed("The node's watch ended at once", errors.New("very short watch")) {
				return
			}
		default:
			c.cfg.Log.V(4).Info("The node's watch ended; watching again", "node", c.cfg.NodeName, "resourceVersion", rv)
			if end.events > 0 {
				backoff = 0
			}
		}
	}
}

// listNode lists the Node at resource version rv.
func (c *Controller) listNode(ctx context.Context, w NodeWatcher, sel, rv string) (*v1.NodeList, error) {
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	nodes, err := w.List(cctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv})
	if err == nil && nodes == nil {
		err = errors.New("list returned nothing")
	}
	return nodes, err
}

// observeList keeps the listed Node, or forgets the Node if the list,
// at a later resource version than the Node held, has none.
func (c *Controller) observeList(nodes *v1.NodeList) {
	for i := range nodes.Items {
		if nodes.Items[i].Name == c.cfg.NodeName {
			c.observe(&nodes.Items[i])
			return
		}
	}
	c.observeGone(nodes.ResourceVersion)
}

// setWatching records whether a watch of the Node is open; the Node held
// was current until a watch ended.
func (c *Controller) setWatching(b bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watching = b
	if !b {
		c.readAt = c.cfg.Clock.Now()
	}
}

// watchEnd is how a watch from some resource version ended: rv is the
// last resource version it delivered (its start if none), events how
// many events it delivered, err the error of an Error event that ended it.
type watchEnd struct {
	rv     string
	events int
	err    error
}

// consumeWatch applies wi's events, of a watch from rv, until it ends or
// ctx does.
func (c *Controller) consumeWatch(ctx context.Context, wi watch.Interface, rv string) watchEnd {
	end := watchEnd{rv: rv}
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return end
		case ev, ok = <-wi.ResultChan():
		}
		if !ok {
			return end
		}
		end.events++
		switch ev.Type {
		case watch.Error:
			end.err = apierrors.FromObject(ev.Object)
			return end
		case watch.Added, watch.Modified:
			if n, ok := ev.Object.(*v1.Node); ok && n.Name == c.cfg.NodeName {
				c.observe(n)
			}
		case watch.Deleted:
			if n, ok := ev.Object.(*v1.Node); ok && n.Name == c.cfg.NodeName {
				c.observeGone(n.ResourceVersion)
			}
		}
		if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
			end.rv = m.GetResourceVersion()
		}
	}
}
