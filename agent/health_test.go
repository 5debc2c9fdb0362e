package agent

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/server"
)

func TestHealthChecks(t *testing.T) {
	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(fastConfig(rt))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SyncLoopHealthy(); err != nil {
		t.Errorf("before Run the sync loop counts as healthy, as the kubelet's: %v", err)
	}
	if err := a.PLEGHealthy(); err == nil || err.Error() != "pleg has yet to be successful" {
		t.Errorf("before its first relist the PLEG is unhealthy with its own error (the node's Ready message says \"PLEG is not healthy: <it>\", as the kubelet's): %v", err)
	}
	// Both health-check shapes take the agent's funcs as they are.
	_ = node.HealthCheck{Name: "PLEG", Check: a.PLEGHealthy}
	_ = server.HealthCheck{Name: "syncloop", Check: a.SyncLoopHealthy}
	c := fastConfig(rt)
	clk := clocktesting.NewFakeClock(time.Now())
	c.Clock = clk
	run := start(t, c)
	// the loop waits out a runtime not yet checked on the fake clock: step it
	waitFor(t, "the PLEG's first relist", func() bool { clk.Step(100 * time.Millisecond); return run.a.PLEGHealthy() == nil })
	waitFor(t, "the sync loop's first iteration", func() bool {
		clk.Step(100 * time.Millisecond)
		l := run.a.loopRef.Load()
		return l != nil && !l.LatestLoopEntryTime().IsZero()
	})
	if err := run.a.SyncLoopHealthy(); err != nil {
		t.Errorf("a running loop is healthy: %v", err)
	}
	// nothing wakes the loop while the clock stands still past the limit
	run.stop()
	clk.SetTime(clk.Now().Add(6 * time.Minute))
	if err := run.a.SyncLoopHealthy(); err == nil || err.Error() != "sync Loop took longer than expected" {
		t.Errorf("a loop idle for longer than 5 minutes is unhealthy with the kubelet's message, got %v", err)
	}
}
