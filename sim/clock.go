package sim

import (
	"container/heap"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Clock is the virtual clock of a Cluster that RunFor and RunUntil step: time stands still until the cluster is idle, then jumps to the next
// timer. It satisfies agent.Clock. Safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters waiterHeap
	seq     uint64
}

var _ interface {
	clock.WithTicker
	clock.WithDelayedExecution
} = (*Clock)(nil)

// NewClock returns a virtual clock showing t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

type waiter struct {
	at     time.Time
	seq    uint64 // creation order, ties broken by it
	period time.Duration
	ch     chan time.Time
	fn     func() // AfterFunc
	index  int    // in the heap, -1 when not in it
}

type waiterHeap []*waiter

func (h waiterHeap) Len() int { return len(h) }
func (h waiterHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h waiterHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *waiterHeap) Push(x any)   { w := x.(*waiter); w.index = len(*h); *h = append(*h, w) }
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}

// Now returns the virtual time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since returns the virtual time elapsed since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// add schedules a waiter d from now; d <= 0 fires at the next step.
func (c *Clock) add(d, period time.Duration, fn func()) *waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	w := &waiter{at: c.now.Add(max(d, 0)), seq: c.seq, period: period, fn: fn, index: -1}
	if fn == nil {
		w.ch = make(chan time.Time, 1)
	}
	if d <= 0 && fn == nil && period == 0 {
		w.ch <- c.now // due now, as time.After(0)
		return w
	}
	heap.Push(&c.waiters, w)
	return w
}

// remove unschedules w; it reports whether w was pending.
func (c *Clock) remove(w *waiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.index < 0 {
		return false
	}
	heap.Remove(&c.waiters, w.index)
	return true
}

// reset reschedules w to fire d from now; it reports whether w was pending.
func (c *Clock) reset(w *waiter, d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := w.index >= 0
	if was {
		heap.Remove(&c.waiters, w.index)
	}
	c.seq++
	w.at, w.seq = c.now.Add(max(d, 0)), c.seq
	heap.Push(&c.waiters, w)
	return was
}

// next returns the time of the earliest pending waiter.
func (c *Clock) next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiters) == 0 {
		return time.Time{}, false
	}
	return c.waiters[0].at, true
}

// advance sets the time to t (never backwards) and fires every waiter due
// by then, in order; tickers fire once per step however many periods
// passed, as a real ticker drops ticks a slow reader missed. It returns how
// many fired.
func (c *Clock) advance(t time.Time) int {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	var fns []func()
	n := 0
	for len(c.waiters) > 0 && !c.waiters[0].at.After(c.now) {
		w := c.waiters[0]
		n++
		if w.period > 0 {
			for !w.at.After(c.now) {
				w.at = w.at.Add(w.period)
			}
			c.seq++
			w.seq = c.seq
			heap.Fix(&c.waiters, 0)
		} else {
			heap.Pop(&c.waiters)
		}
		if w.fn != nil {
			fns = append(fns, w.fn)
			continue
		}
		select {
		case w.ch <- c.now:
		default: // an unread tick is dropped
		}
	}
	c.mu.Unlock()
	for _, fn := range fns {
		go fn()
	}
	return n
}

// Step moves the clock forward by d and fires what is due, without waiting
// for the cluster: for tests of a single part. A Cluster steps it with
// RunFor.
func (c *Clock) Step(d time.Duration) { c.advance(c.Now().Add(d)) }

// After returns a channel that receives the time d from now.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.add(d, 0, nil).ch }

// Tick returns a ticker's channel; a non-positive d gives nil, as time.Tick.
func (c *Clock) Tick(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return c.add(d, d, nil).ch
}

// Sleep blocks until d has passed on the clock.
func (c *Clock) Sleep(d time.Duration) { <-c.After(d) }

// NewTimer returns a timer firing d from now.
func (c *Clock) NewTimer(d time.Duration) clock.Timer { return &timer{c: c, w: c.add(d, 0, nil)} }

// AfterFunc calls f in its own goroutine d from now.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return &timer{c: c, w: c.add(d, 0, f)}
}

// NewTicker returns a ticker firing every d; d must be positive.
func (c *Clock) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("sim: non-positive interval for NewTicker")
	}
	return &ticker{c: c, w: c.add(d, d, nil)}
}

type timer struct {
	c *Clock
	w *waiter
}

func (t *timer) C() <-chan time.Time { return t.w.ch }
func (t *timer) Stop() bool          { return t.c.remove(t.w) }
func (t *timer) Reset(d time.Duration) bool {
	// As time.Timer since Go 1.23: a stale value is not delivered.
	if t.w.ch != nil {
		select {
		case <-t.w.ch:
		default:
		}
	}
	return t.c.reset(t.w, d)
}

type ticker struct {
	c *Clock
	w *waiter
}

func (t *ticker) C() <-chan time.Time { return t.w.ch }
func (t *ticker) Stop()               { t.c.remove(t.w) }
