package stats

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// cpuSampleTTL is how long a sample of something no longer seen is kept,
// the kubelet's CRI stats provider's defaultCachePeriod.
const cpuSampleTTL = 10 * time.Minute

// cpuSample is the last cumulative CPU time seen of one key, and the rate
// computed when it was taken.
type cpuSample struct {
	at    time.Time
	nanos uint64
	rate  *uint64
}

// rates turns cumulative CPU time into usageNanoCores between two
// samples, as the kubelet's CRI stats provider does for runtimes that
// report no rate: an updating read computes the rate against the previous
// sample and keeps the new one; any other read returns the rate the last
// update computed (nil before two updates).
type rates struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	last  map[string]cpuSample
}

func newRates(c clock.PassiveClock) *rates {
	return &rates{clock: c, last: map[string]cpuSample{}}
}

// rate returns key's usageNanoCores given its cumulative CPU time at at.
// A counter that went backwards (a restarted container under the same
// key) or a sample no newer than the last restarts the computation.
func (r *rates) rate(key string, at time.Time, nanos uint64, update bool) *uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.last[key]
	if !update {
		if !ok || prev.rate == nil {
			return nil
		}
		v := *prev.rate
		return &v
	}
	next := cpuSample{at: at, nanos: nanos}
	if ok && nanos >= prev.nanos && at.After(prev.at) {
		v := uint64(float64(nanos-prev.nanos) / float64(at.Sub(prev.at)) * float64(time.Second))
		next.rate = &v
	} else if ok && !at.After(prev.at) && nanos == prev.nanos {
		next = prev // the same sample again: keep the rate
	}
	r.last[key] = next
	if next.rate == nil {
		return nil
	}
	v := *next.rate
	return &v
}

// sweep forgets samples older than cpuSampleTTL.
func (r *rates) sweep() {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, s := range r.last {
		if now.Sub(s.at) > cpuSampleTTL {
			delete(r.last, k)
		}
	}
}
