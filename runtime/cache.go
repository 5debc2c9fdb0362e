package runtime

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Cache holds the latest PodStatus of every pod, with the time it was
// observed. The PLEG writes it after each relist; pod workers read it with
// GetNewerThan so that a sync never acts on status older than the event that
// caused it. It has the semantics of the kubelet's kubecontainer.Cache.
type Cache interface {
	// Get returns the cached status and error of a pod. A pod the cache does
	// not know gets an empty PodStatus with only ID set.
	Get(uid types.UID) (*PodStatus, error)
	// Set stores status and err observed at timestamp, unless the cache
	// already holds a newer observation; it reports whether it stored.
	Set(uid types.UID, status *PodStatus, err error, timestamp time.Time) bool
	// GetNewerThan blocks until the cache holds data of the pod observed
	// after minTime, or the whole cache was brought up to date after minTime
	// (see UpdateTime), or ctx ends (then it returns ctx's error).
	GetNewerThan(ctx context.Context, uid types.UID, minTime time.Time) (*PodStatus, error)
	// Delete forgets a pod.
	Delete(uid types.UID)
	// UpdateTime declares every entry current as of t, waking waiters with
	// minTime before t. The PLEG calls it after each complete relist.
	UpdateTime(t time.Time)
}

type cacheEntry struct {
	status   *PodStatus
	err      error
	modified time.Time
}

type cacheWaiter struct {
	minTime time.Time
	ch      chan cacheEntry
}

// cache is the Cache of NewCache.
type cache struct {
	mu sync.Mutex
	// pods holds the entries, keyed by pod UID.
	pods map[types.UID]cacheEntry
	// timestamp is the latest UpdateTime; every entry is at least this fresh.
	timestamp time.Time
	// waiters holds the blocked GetNewerThan calls per pod.
	waiters map[types.UID][]*cacheWaiter
	// onWait, if set, is called when a GetNewerThan starts to wait.
	onWait func()
}

// NewCache returns an empty, concurrency-safe Cache.
func NewCache() Cache {
	return NewCacheWithOnWait(nil)
}

// NewCacheWithOnWait is NewCache whose GetNewerThan calls onWait (if not
// nil, without the cache's lock) each time it has to wait for newer data:
// the agent asks its PLEG for a relist there, so a pod worker that syncs
// again soon after its last sync (the pod was deleted, its spec changed)
// waits for that relist rather than for the next periodic one. onWait must
// not block.
func NewCacheWithOnWait(onWait func()) Cache {
	return &cache{
		pods:    make(map[types.UID]cacheEntry),
		waiters: make(map[types.UID][]*cacheWaiter),
		onWait:  onWait,
	}
}

func (c *cache) Get(uid types.UID) (*PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.get(uid)
	return e.status, e.err
}

// get returns the entry of uid or a default one; c.mu must be held.
func (c *cache) get(uid types.UID) cacheEntry {
	if e, ok := c.pods[uid]; ok {
		return e
	}
	return cacheEntry{status: &PodStatus{ID: uid}, modified: c.timestamp}
}

// fresh returns the entry of uid if it is newer than minTime; c.mu must be held.
func (c *cache) fresh(uid types.UID, minTime time.Time) (cacheEntry, bool) {
	e, ok := c.pods[uid]
	if ok && e.modified.After(minTime) {
		return e, true
	}
	if c.timestamp.After(minTime) {
		return c.get(uid), true
	}
	return cacheEntry{}, false
}

func (c *cache) GetNewerThan(ctx context.Context, uid types.UID, minTime time.Time) (*PodStatus, error) {
	c.mu.Lock()
	if e, ok := c.fresh(uid, minTime); ok {
		c.mu.Unlock()
		return e.status, e.err
	}
	w := &cacheWaiter{minTime: minTime, ch: make(chan cacheEntry, 1)}
	c.waiters[uid] = append(c.waiters[uid], w)
	c.mu.Unlock()
	if c.onWait != nil {
		c.onWait()
	}

	select {
	case e := <-w.ch:
		return e.status, e.err
	case <-ctx.Done():
		c.mu.Lock()
		c.removeWaiter(uid, w)
		c.mu.Unlock()
		// A notification may have raced with cancellation; prefer the data.
		select {
		case e := <-w.ch:
			return e.status, e.err
		default:
		}
		return nil, ctx.Err()
	}
}

func (c *cache) removeWaiter(uid types.UID, w *cacheWaiter) {
	ws := c.waiters[uid]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(c.waiters, uid)
	} else {
		c.waiters[uid] = ws
	}
}

// Reserve makes room for n pods in a cache that holds none, so that a
// first relist of n pods fills it without growing its map step by step
// (the PLEG calls it when present).
func (c *cache) Reserve(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pods) == 0 && n > 0 {
		c.pods = make(map[types.UID]cacheEntry, n)
	}
}

func (c *cache) Set(uid types.UID, status *PodStatus, err error, timestamp time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.pods[uid]; ok && old.modified.After(timestamp) {
		return false
	}
	c.pods[uid] = cacheEntry{status: status, err: err, modified: timestamp}
	c.notify(uid)
	return true
}

func (c *cache) Delete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

func (c *cache) UpdateTime(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timestamp = t
	for uid := range c.waiters {
		c.notify(uid)
	}
}

// notify hands fresh data to the waiters of uid that it satisfies; c.mu must
// be held.
func (c *cache) notify(uid types.UID) {
	ws := c.waiters[uid]
	if len(ws) == 0 {
		return
	}
	kept := ws[:0]
	for _, w := range ws {
		if e, ok := c.fresh(uid, w.minTime); ok {
			w.ch <- e // buffered, one send per waiter
			continue
		}
		kept = append(kept, w)
	}
	for i := len(kept); i < len(ws); i++ {
		ws[i] = nil
	}
	if len(kept) == 0 {
		delete(c.waiters, uid)
	} else {
		c.waiters[uid] = kept
	}
}
