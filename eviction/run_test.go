package eviction_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/eviction"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor steps the fake clock by step until cond holds (at most n steps).
func waitFor(t *testing.T, e *env, step time.Duration, n int, cond func() bool) {
	t.Helper()
	for i := 0; i < n; i++ {
		if cond() {
			return
		}
		// Let the manager reach its timer before stepping.
		deadline := time.Now().Add(time.Second)
		for !e.clock.HasWaiters() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		e.clock.Step(step)
		time.Sleep(2 * time.Millisecond)
	}
	require.True(t, cond(), "condition not met after %d steps of %v", n, step)
}

func TestRunEvictsEachIntervalAndWaitsForCleanup(t *testing.T) {
	var cleaned atomic.Bool
	e := newEnv(t, eviction.Config{
		Thresholds:   thresholds(t, "memory.available<1Gi", "", "", ""),
		PodCleanedUp: func(*v1.Pod) bool { return cleaned.Load() },
	}, memoryPods...)
	e.node.set(func(n *node) { n.memAvail, n.memWS = 500*mi, 7692*mi })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.m.Run(ctx) }()

	waitFor(t, e, 0, 1000, func() bool { return len(e.kill.names()) == 1 })
	// Waiting for the pod's cleanup: no second eviction however long.
	for i := 0; i < 5; i++ {
		waitFor(t, e, time.Second, 1, func() bool { return true })
	}
	assert.Len(t, e.kill.names(), 1, "no eviction while the evicted pod is not cleaned up")
	cleaned.Store(true)
	waitFor(t, e, time.Second, 100, func() bool { return len(e.kill.names()) == 2 })
	assert.Equal(t, []string{"burstable", "burstable"}, e.kill.names(), "the pod is still active in this test: ranked first again")

	cancel()
	require.NoError(t, <-done)
}

func TestRunStopsWithContext(t *testing.T) {
	e := newEnv(t, eviction.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.m.Run(ctx) }()
	waitFor(t, e, 10*time.Second, 3, func() bool { e.node.mu.Lock(); defer e.node.mu.Unlock(); return e.node.calls >= 2 })
	cancel()
	require.NoError(t, <-done)
}

// notifiers is a NotifierFactory that records the usage armed.
type notifiers struct {
	mu     sync.Mutex
	armed  []int64
	notify func()
	stops  int
}

func (f *notifiers) Notify(allocatable bool, usage int64, notify func()) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = append(f.armed, usage)
	f.notify = notify
	return func() { f.mu.Lock(); f.stops++; f.mu.Unlock() }, nil
}

func TestMemoryNotifierWakesTheManager(t *testing.T) {
	f := &notifiers{}
	e := newEnv(t, eviction.Config{Thresholds: thresholds(t, "memory.available<1Gi", "", "", ""), MemoryNotifier: f}, memoryPods...)
	e.node.memInactive = 512 * mi
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.m.Run(ctx) }()
	waitFor(t, e, 0, 100, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.armed) == 1 })
	// capacity 8Gi - threshold 1Gi + inactive file 512Mi
	assert.Equal(t, int64(7*gi+512*mi), f.armed[0])

	calls := func() int { e.node.mu.Lock(); defer e.node.mu.Unlock(); return e.node.calls }
	before := calls()
	e.node.set(func(n *node) { n.memAvail, n.memWS = 500*mi, 7692*mi })
	f.mu.Lock()
	f.notify()
	f.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for len(e.kill.names()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, []string{"burstable"}, e.kill.names(), "a notification runs a pass before the interval")
	assert.Greater(t, calls(), before)
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, 1, f.stops, "the notifier is stopped with Run")
}

func TestParseThresholdConfig(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	for _, tc := range []struct {
		name                       string
		hard, soft, grace, reclaim string
		want                       []string
		wantErr                    bool
	}{
		{name: "hard quantity and percentage", hard: "memory.available<100Mi,nodefs.available<10%",
			want: []string{"memory.available<100Mi", "nodefs.available<10%"}},
		{name: "soft with grace period", soft: "memory.available<1Gi", grace: "memory.available=1m30s",
			want: []string{"memory.available<1Gi for 1m30s"}},
		{name: "soft without grace period", soft: "memory.available<1Gi", wantErr: true},
		{name: "minimum reclaim", hard: "imagefs.available<15%", reclaim: "imagefs.available=2Gi",
			want: []string{"imagefs.available<15% reclaim 2Gi"}},
		{name: "0% and 100% are ignored", hard: "nodefs.available<0%,imagefs.available<100%"},
		{name: "unknown signal", hard: "swap.available<1Gi", wantErr: true},
		{name: "percentage above 100", hard: "nodefs.available<110%", wantErr: true},
		{name: "zero quantity", hard: "memory.available<0", wantErr: true},
		{name: "bad quantity", hard: "memory.available<lots", wantErr: true},
		{name: "negative grace period", soft: "memory.available<1Gi", grace: "memory.available=-1m", wantErr: true},
		{name: "zero percentage minimum reclaim", hard: "nodefs.available<10%", reclaim: "nodefs.available=0%", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parse := func(s, sep string) map[string]string {
				m, err := eviction.ParseMap(s, sep)
				require.NoError(t, err)
				return m
			}
			ts, err := eviction.ParseThresholdConfig(false, parse(tc.hard, "<"), parse(tc.soft, "<"), parse(tc.grace, "="), parse(tc.reclaim, "="))
			if tc.wantErr {
				assert.ErrorIs(t, err, eviction.ErrInvalidThreshold)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, th := range ts {
				got = append(got, th.String())
			}
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := eviction.ParseMap("memory.available", "<")
	assert.ErrorIs(t, err, eviction.ErrInvalidThreshold)

	def := eviction.DefaultThresholds()
	var got []string
	for _, th := range def {
		got = append(got, th.String())
	}
	assert.Equal(t, []string{"imagefs.available<15%", "memory.available<100Mi", "nodefs.available<10%", "nodefs.inodesFree<5%"}, got)
	assert.Equal(t, q("100Mi").Value(), def[1].Value.Quantity.Value())
}

func ptrQ(q resource.Quantity) *resource.Quantity { return &q }
