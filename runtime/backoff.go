package runtime

import (
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Backoff is an exponential back-off per key, the mechanism behind
// CrashLoopBackOff and ImagePullBackOff: each Next doubles the key's delay
// from Initial up to Max; a key not touched for Expiry starts over. It is
// safe for concurrent use.
type Backoff struct {
	clock    clock.PassiveClock
	initial  time.Duration
	max      time.Duration
	expiry   time.Duration
	mu       sync.Mutex
	perEntry map[string]*backoffEntry
}

type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

// NewBackoff returns a back-off growing from initial to max. expiry is how
// long a key may rest before it starts again from initial; 0 means 2*max, as
// in the kubelet. clk nil means the real clock.
func NewBackoff(initial, max, expiry time.Duration, clk clock.PassiveClock) *Backoff {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if expiry <= 0 {
		expiry = 2 * max
	}
	return &Backoff{clock: clk, initial: initial, max: max, expiry: expiry, perEntry: map[string]*backoffEntry{}}
}

// Get returns the key's current delay, or 0.
func (b *Backoff) Get(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.perEntry[key]; ok {
		return e.delay
	}
	return 0
}

// Next records a failure of key that happened at eventTime: the first one (or
// the first after expiry) sets the delay to initial, later ones double it.
func (b *Backoff) Next(key string, eventTime time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.perEntry[key]
	if !ok || b.expired(e, eventTime) {
		e = &backoffEntry{delay: b.initial}
		b.perEntry[key] = e
	} else {
		e.delay = min(2*e.delay, b.max)
	}
	e.lastUpdate = b.clock.Now()
}

// IsInBackOffSince reports whether key is still backing off from a failure
// at eventTime: its delay has not yet passed since eventTime.
func (b *Backoff) IsInBackOffSince(key string, eventTime time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.perEntry[key]
	if !ok || b.expired(e, eventTime) {
		return false
	}
	return b.clock.Since(eventTime) < e.delay
}

// remainingSince returns key's delay and how much of it is left after a
// failure at eventTime: no time left when IsInBackOffSince is false. One
// lock for both, so the message's delay is the one the wait is from.
func (b *Backoff) remainingSince(key string, eventTime time.Time) (delay, left time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.perEntry[key]
	if !ok || b.expired(e, eventTime) {
		return 0, 0
	}
	return e.delay, e.delay - b.clock.Since(eventTime)
}

// IsInBackOffSinceUpdate reports whether key's delay has not yet passed
// between its last Next and eventTime. Image pulls use it with the current
// time, as the kubelet's image manager does: a pull that failed is not
// retried until its delay passed.
func (b *Backoff) IsInBackOffSinceUpdate(key string, eventTime time.Time) bool {
	return b.RemainingSinceUpdate(key, eventTime) > 0
}

// RemainingSinceUpdate returns how much of key's delay is left at
// eventTime, counted from its last Next; 0 when IsInBackOffSinceUpdate is
// false. An image pull refused in back-off says so (BackOffError), so that
// the pod is synced again when the pull may be tried, not polled.
func (b *Backoff) RemainingSinceUpdate(key string, eventTime time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.perEntry[key]
	if !ok || b.expired(e, eventTime) {
		return 0
	}
	return max(0, e.delay-eventTime.Sub(e.lastUpdate))
}

// Reset forgets key.
func (b *Backoff) Reset(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.perEntry, key)
}

// GC forgets keys that have expired.
func (b *Backoff) GC() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	for k, e := range b.perEntry {
		if b.expired(e, now) {
			delete(b.perEntry, k)
		}
	}
}

// Len returns how many keys are tracked.
func (b *Backoff) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.perEntry)
}

func (b *Backoff) expired(e *backoffEntry, t time.Time) bool {
	return t.Sub(e.lastUpdate) > b.expiry
}

// BackoffKey is the key of a container of a pod: it includes the spec hash,
// so a changed container starts without the old container's back-off, as in
// the kubelet.
func BackoffKey(pod *v1.Pod, c *v1.Container) string {
	return fmt.Sprintf("%s_%s_%s_%s_%x", pod.Name, pod.Namespace, pod.UID, c.Name, HashContainer(c))
}
