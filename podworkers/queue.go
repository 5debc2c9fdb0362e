package podworkers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Queue is the work queue of pod UIDs the pod workers want resynced, each
// with the time it becomes due. The sync loop calls GetWork on every sync
// tick. It is safe for concurrent use.
type Queue struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	due   map[types.UID]time.Time
}

var _ ResyncQueue = (*Queue)(nil)

// NewQueue returns an empty Queue on clk (nil: the real clock).
func NewQueue(clk clock.PassiveClock) *Queue {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Queue{clock: clk, due: make(map[types.UID]time.Time)}
}

// Enqueue makes uid due after delay; it replaces an earlier due time, so the
// latest decision of the pod's worker wins.
func (q *Queue) Enqueue(uid types.UID, delay time.Duration) {
	t := q.clock.Now().Add(delay)
	q.mu.Lock()
	q.due[uid] = t
	q.mu.Unlock()
}

// GetWork removes and returns the UIDs that are due, in no particular order.
func (q *Queue) GetWork() []types.UID {
	now := q.clock.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []types.UID
	for uid, t := range q.due {
		if !t.After(now) {
			out = append(out, uid)
			delete(q.due, uid)
		}
	}
	return out
}

// Len returns how many UIDs are queued, due or not.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.due)
}
