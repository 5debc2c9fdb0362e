package sim

import (
	"context"
	goruntime "runtime"
	"runtime/metrics"
	"time"
)

// idleProbe tells when no goroutine of the process can run: every one is
// blocked (on a channel, a lock, the virtual clock). It reads the
// scheduler's counts (runtime/metrics, Go 1.26), which is cheap enough to
// do at every step; the counts are approximate, so idleness must hold for
// several readings in a row with no goroutine created in between.
//
// A goroutine waiting on the garbage collector (one that allocated during
// a cycle and parked to assist it, or called runtime.GC) counts as
// blocked, yet goes on once the cycle ends, with nobody's help: while a
// cycle runs the process is not idle. A cycle stops the world at its start
// and at its end, so it runs while the count of those pauses is odd, that
// is not twice the count of cycles completed (the scheduler's latency of
// a busy machine stretches such a cycle over many steps).
type idleProbe struct {
	samples []metrics.Sample
}

func newIdleProbe() *idleProbe {
	return &idleProbe{samples: []metrics.Sample{
		{Name: "/sched/goroutines/running:goroutines"},
		{Name: "/sched/goroutines/runnable:goroutines"},
		{Name: "/sched/goroutines/not-in-go:goroutines"},
		{Name: "/sched/goroutines-created:goroutines"},
		{Name: "/sched/pauses/total/gc:seconds"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}}
}

// read returns whether only the caller runs, and a fingerprint of what
// else could change: goroutines created so far and goroutines in system
// calls. The latter are not counted against idleness: the runtime keeps
// some there for good (a CPU profile's reader, os/signal's receiver), and
// nothing on the in-memory path makes system calls; but a change of their
// number means something moved.
func (p *idleProbe) read() (bool, uint64) {
	metrics.Read(p.samples)
	v := func(i int) uint64 {
		if p.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return p.samples[i].Value.Uint64()
	}
	return v(0) <= 1 && v(1) == 0 && !p.collecting(v(5)), v(3)<<16 ^ v(2)
}

// collecting reports whether a garbage collection cycle runs: the GC's
// stop-the-world pauses are not twice the cycles completed (2n+1 while the
// n+1st marks; for an instant at its end, 2n+1 with n+1 counted).
func (p *idleProbe) collecting(cycles uint64) bool {
	h := p.samples[4].Value
	if h.Kind() != metrics.KindFloat64Histogram {
		return false
	}
	var pauses uint64
	for _, n := range h.Float64Histogram().Counts {
		pauses += n
	}
	return pauses != 2*cycles
}

// stableReadings is how many consecutive idle readings count as idle.
const stableReadings = 4

// wait returns once the process is idle, or ctx ends, or limit (real
// time) passes; it reports whether it saw idleness.
func (p *idleProbe) wait(ctx context.Context, limit time.Duration) bool {
	var deadline time.Time
	stable, spins := 0, 0
	var created uint64
	for {
		goruntime.Gosched()
		idle, c := p.read()
		switch {
		case !idle || c != created:
			stable, created = 0, c
		default:
			stable++
			if stable >= stableReadings {
				return true
			}
		}
		spins++
		if spins%64 == 0 {
			if ctx.Err() != nil {
				return false
			}
			if deadline.IsZero() {
				deadline = time.Now().Add(limit)
			} else if time.Now().After(deadline) {
				return false
			}
			// Other OS threads (or processes) may hold the work: give
			// them the CPU.
			time.Sleep(20 * time.Microsecond)
		}
	}
}
