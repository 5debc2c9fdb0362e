package runtime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestBackoffGrowth(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	b := NewBackoff(10*time.Second, 60*time.Second, 0, clk)
	var got []time.Duration
	for range 5 {
		b.Next("k", clk.Now())
		got = append(got, b.Get("k"))
		clk.SetTime(clk.Now().Add(time.Second))
	}
	assert.Equal(t, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 60 * time.Second, 60 * time.Second}, got,
		"delay doubles from initial and is capped at max")
	assert.Zero(t, b.Get("other"), "an unknown key has no delay")
}

func TestBackoffIsInBackOffSince(t *testing.T) {
	tests := []struct {
		name     string
		failures int           // Next calls, each at the failure time
		elapsed  time.Duration // since the last failure
		want     bool
	}{
		{"unknown key is not in back-off", 0, 0, false},
		{"right after the first failure", 1, 0, true},
		{"just before the initial delay passes", 1, 10*time.Second - time.Nanosecond, true},
		{"once the initial delay passed", 1, 10 * time.Second, false},
		{"second failure doubles the wait", 2, 15 * time.Second, true},
		{"second failure's wait passes", 2, 20 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(t0)
			b := NewBackoff(10*time.Second, time.Minute, 0, clk)
			failedAt := t0
			for range tt.failures {
				b.Next("k", failedAt)
			}
			clk.SetTime(failedAt.Add(tt.elapsed))
			assert.Equal(t, tt.want, b.IsInBackOffSince("k", failedAt))
		})
	}
}

func TestBackoffExpiry(t *testing.T) {
	tests := []struct {
		name    string
		expiry  time.Duration
		rest    time.Duration
		wantGet time.Duration
	}{
		{"failure within expiry keeps growing", 5 * time.Minute, 5 * time.Minute, 40 * time.Second},
		{"failure after expiry starts again from initial", 5 * time.Minute, 5*time.Minute + time.Second, 10 * time.Second},
		{"expiry 0 means twice max: within", 0, 2 * time.Minute, 40 * time.Second},
		{"expiry 0 means twice max: beyond", 0, 2*time.Minute + time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(t0)
			b := NewBackoff(10*time.Second, time.Minute, tt.expiry, clk)
			b.Next("k", clk.Now())
			b.Next("k", clk.Now())
			later := t0.Add(tt.rest)
			clk.SetTime(later)
			b.Next("k", later)
			assert.Equal(t, tt.wantGet, b.Get("k"))
		})
	}
}

func TestBackoffExpiredKeyIsNotInBackOff(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	b := NewBackoff(10*time.Second, time.Hour, time.Minute, clk)
	b.Next("k", t0)
	b.Next("k", t0) // 20s
	// A failure that happened after the entry expired is judged afresh.
	failedAt := t0.Add(2 * time.Minute)
	clk.SetTime(failedAt)
	assert.False(t, b.IsInBackOffSince("k", failedAt))
}

func TestBackoffGC(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	b := NewBackoff(10*time.Second, time.Minute, 0, clk)
	b.Next("old", t0)
	clk.SetTime(t0.Add(90 * time.Second))
	b.Next("recent", clk.Now())
	assert.Equal(t, 2, b.Len())

	clk.SetTime(t0.Add(2 * time.Minute))
	b.GC()
	assert.Equal(t, 2, b.Len(), "an entry exactly at expiry is kept")

	clk.SetTime(t0.Add(2*time.Minute + time.Second))
	b.GC()
	assert.Equal(t, 1, b.Len(), "the entry idle beyond expiry is collected")
	assert.Zero(t, b.Get("old"))
	assert.Equal(t, 10*time.Second, b.Get("recent"))
}

func TestBackoffReset(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	b := NewBackoff(10*time.Second, time.Minute, 0, clk)
	b.Next("k", t0)
	b.Next("k", t0)
	b.Next("other", t0)
	b.Reset("k")
	assert.Zero(t, b.Get("k"))
	assert.False(t, b.IsInBackOffSince("k", t0))
	b.Next("k", t0)
	assert.Equal(t, 10*time.Second, b.Get("k"), "after Reset the key starts from initial")
	assert.Equal(t, 10*time.Second, b.Get("other"), "Reset leaves other keys alone")
}

func TestBackoffKey(t *testing.T) {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", "uid-1"
	c := &v1.Container{Name: "app", Image: "nginx:1"}
	k := BackoffKey(pod, c)
	assert.Equal(t, k, BackoffKey(pod, c.DeepCopy()), "the key is stable")

	changed := c.DeepCopy()
	changed.Image = "nginx:2"
	assert.NotEqual(t, k, BackoffKey(pod, changed), "a changed spec gets a fresh key")

	other := pod.DeepCopy()
	other.UID = "uid-2"
	assert.NotEqual(t, k, BackoffKey(other, c), "another pod instance gets its own key")
}

func TestBackoffIsInBackOffSinceUpdate(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	b := NewBackoff(10*time.Second, time.Minute, 0, clk)
	assert.False(t, b.IsInBackOffSinceUpdate("k", t0), "unknown key")

	clk.SetTime(t0.Add(time.Hour)) // the update time counts, not any event time
	b.Next("k", t0)
	updated := clk.Now()
	tests := []struct {
		name string
		at   time.Time
		want bool
	}{
		{"right after the failed attempt", updated, true},
		{"just before the delay passed", updated.Add(10*time.Second - time.Nanosecond), true},
		{"once the delay passed", updated.Add(10 * time.Second), false},
		{"after expiry", updated.Add(3 * time.Minute), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, b.IsInBackOffSinceUpdate("k", tt.at))
			left := b.RemainingSinceUpdate("k", tt.at)
			assert.Equal(t, tt.want, left > 0, "RemainingSinceUpdate %v", left)
			if tt.want {
				assert.Equal(t, updated.Add(10*time.Second).Sub(tt.at), left, "the rest of the delay")
			}
		})
	}
}
