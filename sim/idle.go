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
type idleProbe struct {
	samples []metrics.Sample
}

func newIdleProbe() *idleProbe {
	return &idleProbe{samples: []metrics.Sample{
		{Name: "/sched/goroutines/running:goroutines"},
		{Name: "/sched/goroutines/runnable:goroutines"},
		{Name: "/sched/goroutines/not-in-go:goroutines"},
		{Name: "/sched/goroutines-created:goroutines"},
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
	return v(0) <= 1 && v(1) == 0, v(3)<<16 ^ v(2)
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
