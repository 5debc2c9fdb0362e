package objects

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// objectWatcher is what a client needs for the Watch strategy; client-go's
// typed clients have it.
type objectWatcher interface {
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Run lets the Cache keep the objects it has read current with watches
// (Config.Watch), until ctx ends; it returns once every watch has stopped.
// Without Run, or without Config.Watch, objects are read again every TTL.
func (c *Cache) Run(ctx context.Context) {
	c.mu.Lock()
	c.runCtx = ctx
	read := make(map[key]*entry, len(c.m))
	for k, e := range c.m {
		read[k] = e
	}
	c.mu.Unlock()
	if c.cfg.Watch {
		// What was read before Run is watched from now on too.
		for k, e := range read {
			e.mu.Lock()
			if e.obj != nil && e.client != nil {
				c.startWatch(k, e, e.obj, e.client)
			}
			e.mu.Unlock()
		}
	}
	<-ctx.Done()
	c.mu.Lock()
	c.runCtx = nil
	for _, e := range c.m {
		e.cancel = nil // their contexts ended with ctx
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// resourceVersion is the resource version of a cached object or list.
func resourceVersion(obj any) string {
	if l, ok := obj.(*serviceList); ok {
		return l.rv
	}
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}

// startWatch starts watching k from obj's resource version, if Run runs,
// the client can watch and nobody watches k yet. e.mu is held.
func (c *Cache) startWatch(k key, e *entry, obj any, client func() any) {
	w, ok := client().(objectWatcher)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runCtx == nil || e.cancel != nil || c.m[k] != e {
		return
	}
	ctx, cancel := context.WithCancel(c.runCtx)
	e.cancel = cancel
	rv := resourceVersion(obj)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer cancel()
		c.watchLoop(ctx, k, e, w, rv)
	}()
}

// watchLoop watches k until ctx ends or k goes unused for ten TTLs,
// watching again when the server ends a watch (from the last resource
// version seen, or from now after an error such as 410 Gone, which
// replays the object only if it exists, so the next read reads it again).
func (c *Cache) watchLoop(ctx context.Context, k key, e *entry, w objectWatcher, rv string) {
	// One idle check for every watch of k: a check started with each watch
	// would never come for an object whose watches the server ends sooner
	// than ten TTLs (an apiserver ends one after 30 to 60 minutes).
	idle := c.cfg.Clock.NewTicker(10 * c.cfg.TTL)
	defer idle.Stop()
	backoff := time.Second
	for ctx.Err() == nil {
		opts := metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}
		if k.kind == kindServices {
			// A list is read again before it is watched from where the
			// read left off, as client-go's reflector: events are applied
			// to a list, so the watch must start at the list's version.
			if rv == "" && !c.relist(ctx, e, w, &rv) {
				if !c.wait(ctx, k, e, idle, backoff) {
					return
				}
				backoff = min(2*backoff, 30*time.Second)
				continue
			}
			opts.ResourceVersion = rv
		} else {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", k.name).String()
		}
		wi, err := w.Watch(ctx, opts)
		if err != nil {
			e.setWatched(false)
			if !c.wait(ctx, k, e, idle, backoff) {
				return
			}
			backoff = min(2*backoff, 30*time.Second)
			rv = ""
			continue
		}
		started := c.cfg.Clock.Now()
		if rv == "" && k.kind != kindServices {
			// From now, the server sends the object only if it exists: one
			// deleted since it was read must not stay served, so the next
			// read reads it again.
			e.mu.Lock()
			e.obj, e.gone, e.watched = nil, false, true
			e.mu.Unlock()
		} else {
			e.setWatched(true)
		}
		end := c.consume(ctx, k, e, wi, idle.C(), rv)
		short := end.events == 0 && c.cfg.Clock.Since(started) < time.Second
		rv = end.rv
		// The entry stops counting as watched, and an unused one leaves the
		// cache, before the watch ends: a read that sees the watch gone
		// must not be served from it.
		e.setWatched(false)
		if end.stale {
			c.drop(k, e)
		}
		wi.Stop()
		if end.stale {
			return
		}
		// As client-go's reflector: a watch ended by an error event, or
		// one that ended within a second without an event, is opened
		// again after the back-off, so that a server refusing every watch
		// that way is not asked again and again; one that served is
		// resumed at once.
		if end.errored || short {
			if !c.wait(ctx, k, e, idle, backoff) {
				return
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
	}
}

// wait waits d before k's next watch, checking at each tick of idle
// whether k went unused (then dropped). It reports false if the watch loop
// must end: ctx ended, or k was dropped.
func (c *Cache) wait(ctx context.Context, k key, e *entry, idle clock.Ticker, d time.Duration) bool {
	retry := c.cfg.Clock.After(d)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-idle.C():
			if c.unused(e) {
				c.drop(k, e)
				return false
			}
		case <-retry:
			return true
		}
	}
}

// unused reports whether e went unasked for ten TTLs.
func (c *Cache) unused(e *entry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Clock.Since(e.lastUsed) > 10*c.cfg.TTL
}

// drop removes e, k's entry, from the cache.
func (c *Cache) drop(k key, e *entry) {
	c.mu.Lock()
	if c.m[k] == e {
		delete(c.m, k)
	}
	c.mu.Unlock()
}

// watchEnd is how a watch ended: rv is the last resource version seen (the
// watch's own if none, "" after an error event), events how many it
// delivered, errored whether an error event ended it, stale whether k went
// unused (checked at each tick of idle).
type watchEnd struct {
	rv      string
	events  int
	errored bool
	stale   bool
}

// consume applies wi's events to e, a watch from rv, until it ends.
func (c *Cache) consume(ctx context.Context, k key, e *entry, wi watch.Interface, idle <-chan time.Time, rv string) watchEnd {
	end := watchEnd{rv: rv}
	for {
		select {
		case <-ctx.Done():
			return end
		case <-idle:
			if c.unused(e) {
				end.stale = true
				return end
			}
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return end
			}
			end.events++
			switch ev.Type {
			case watch.Error:
				end.rv, end.errored = "", true
				return end
			case watch.Bookmark:
			case watch.Added, watch.Modified:
				if !c.wants(k, ev.Object) {
					continue
				}
				e.mu.Lock()
				if l, ok := e.obj.(*serviceList); ok {
					e.obj = l.with(ev.Object.(*v1.Service))
				} else if k.kind != kindServices {
					e.obj, e.gone = ev.Object, false
				}
				e.fetched = c.cfg.Clock.Now()
				e.mu.Unlock()
			case watch.Deleted:
				if !c.wants(k, ev.Object) {
					continue
				}
				e.mu.Lock()
				if l, ok := e.obj.(*serviceList); ok {
					e.obj = l.without(ev.Object.(*v1.Service).Name, resourceVersion(ev.Object))
				} else if k.kind != kindServices {
					e.obj, e.gone = nil, true
				}
				e.mu.Unlock()
			}
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
				end.rv = m.GetResourceVersion()
			}
		}
	}
}

// wants reports whether obj is the kind and name k stands for.
func (c *Cache) wants(k key, obj any) bool {
	switch o := obj.(type) {
	case *v1.ConfigMap:
		return k.kind == kindConfigMap && o.Name == k.name
	case *v1.Secret:
		return k.kind == kindSecret && o.Name == k.name
	case *v1.Service:
		return k.kind == kindServices && o.Namespace == k.namespace
	}
	return false
}

// serviceListWatcher is what a namespace's service list needs to be read
// again before a watch resumes; client-go's service client has it.
type serviceListWatcher interface {
	objectWatcher
	ServiceLister
}

// relist reads the service list of e again and sets *rv to its resource
// version. It reports false if the read failed or the client cannot list.
func (c *Cache) relist(ctx context.Context, e *entry, w objectWatcher, rv *string) bool {
	lw, ok := w.(serviceListWatcher)
	if !ok {
		return false
	}
	l, err := listServices(ctx, lw)
	if err != nil {
		e.setWatched(false)
		return false
	}
	e.mu.Lock()
	e.obj, e.fetched = l, c.cfg.Clock.Now()
	e.mu.Unlock()
	*rv = l.rv
	return true
}

func (e *entry) setWatched(b bool) {
	e.mu.Lock()
	e.watched = b
	if !b {
		e.gone = false
	}
	e.mu.Unlock()
}
