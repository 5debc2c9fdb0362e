package agent

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// periodic is a job every runs: fn each period.
type periodic struct {
	period time.Duration
	fn     func(ctx context.Context)
}

// maxPeriodic is how many jobs one every runs.
const maxPeriodic = 3

// every calls each job's fn each of its periods on a ticker of clk's
// (first call after one period) until ctx ends; it returns nil so it fits
// spawn. The jobs share one goroutine, so one job's call delays the
// others' by its length: a goroutine stack less per job on an agent that
// a simulator runs a thousand of, for the runtime check and the two
// garbage collections, none of which must run at an exact instant.
func every(ctx context.Context, clk clock.WithTicker, jobs ...periodic) error {
	if len(jobs) > maxPeriodic {
		return fmt.Errorf("every: %d jobs, at most %d", len(jobs), maxPeriodic)
	}
	var ticks [maxPeriodic]<-chan time.Time // nil: never ready
	var fns [maxPeriodic]func(context.Context)
	for i, j := range jobs {
		t := clk.NewTicker(j.period)
		defer t.Stop()
		ticks[i], fns[i] = t.C(), j.fn
	}
	var due [maxPeriodic]bool
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticks[0]:
			due[0] = true
		case <-ticks[1]:
			due[1] = true
		case <-ticks[2]:
			due[2] = true
		}
		// Jobs due at once run in the order given, not the select's
		// random pick: on virtual time they often are (a container GC
		// first lets an image GC of the same instant free what the
		// removed containers held), and a simulation must not part there.
		for i := range ticks {
			if !due[i] {
				select {
				case <-ticks[i]:
					due[i] = true
				default:
				}
			}
		}
		for i, d := range due {
			if d {
				due[i] = false
				fns[i](ctx)
			}
		}
	}
}
