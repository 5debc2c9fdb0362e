package agent

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// every calls fn each period on clk's ticker (first call after one period)
// until ctx ends; it returns nil so it fits spawn.
func every(ctx context.Context, clk clock.WithTicker, period time.Duration, fn func(ctx context.Context)) error {
	t := clk.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			fn(ctx)
		}
	}
}
