package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func TestEveryRunsEachJobOnItsOwnPeriodInOneGoroutine(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	var mu sync.Mutex
	calls := map[string]int{}
	job := func(name string, period time.Duration) periodic {
		return periodic{period, func(context.Context) { mu.Lock(); calls[name]++; mu.Unlock() }}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- every(ctx, clk, job("check", 5*time.Second), job("gc", time.Minute)) }()
	for range 24 { // two minutes in 5s steps
		waitFor(t, "both tickers waiting", func() bool { return clk.HasWaiters() })
		clk.Step(5 * time.Second)
		waitFor(t, "the step's calls", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return calls["check"] == int(clk.Since(time.Unix(0, 0))/(5*time.Second))
		})
	}
	waitFor(t, "2 GC rounds", func() bool { mu.Lock(); defer mu.Unlock(); return calls["gc"] == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("every = %v after ctx ended, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["check"] != 24 || calls["gc"] != 2 {
		t.Errorf("calls %v over 2m, want check 24 (5s) and gc 2 (1m)", calls)
	}
}

func TestEveryRefusesMoreJobsThanItSelectsOn(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	nop := periodic{time.Second, func(context.Context) {}}
	if err := every(context.Background(), clk, nop, nop, nop, nop); err == nil {
		t.Fatal("every with 4 jobs: no error, and the 4th would never run")
	}
}
