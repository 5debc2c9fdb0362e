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

func TestEveryRunsJobsDueTogetherInTheirOrder(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	var mu sync.Mutex
	var order []string
	job := func(name string) periodic {
		return periodic{time.Second, func(context.Context) { mu.Lock(); order = append(order, name); mu.Unlock() }}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- every(ctx, clk, job("check"), job("containers"), job("images")) }()
	const steps = 20
	for i := range steps {
		waitFor(t, "the tickers waiting", func() bool { return clk.HasWaiters() })
		clk.Step(time.Second) // all three due at once
		waitFor(t, "the step's calls", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 3*(i+1) })
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < len(order); i += 3 {
		if got := order[i : i+3]; got[0] != "check" || got[1] != "containers" || got[2] != "images" {
			t.Fatalf("step %d ran %v, want [check containers images] (the jobs' order)", i/3+1, got)
		}
	}
}

func TestEveryRefusesMoreJobsThanItSelectsOn(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	nop := periodic{time.Second, func(context.Context) {}}
	if err := every(context.Background(), clk, nop, nop, nop, nop); err == nil {
		t.Fatal("every with 4 jobs: no error, and the 4th would never run")
	}
}
