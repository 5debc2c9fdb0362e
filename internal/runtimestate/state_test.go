package runtimestate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/nodekit/nodekit/internal/runtimestate"
	"github.com/nodekit/nodekit/runtime"
)

// TestStateLeavesTheLastAnswerStanding: the kubelet's runtime state.
func TestStateLeavesTheLastAnswerStanding(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	ready := &runtime.RuntimeStatus{Conditions: []runtime.RuntimeCondition{{Type: runtime.RuntimeReady, Status: true}}}
	notReady := &runtime.RuntimeStatus{Conditions: []runtime.RuntimeCondition{{Type: runtime.RuntimeReady, Status: false}}}
	fail := errors.New("unavailable")
	s := runtimestate.State{DownAfter: 30 * time.Second}
	assert.True(t, s.NeverReady())
	assert.True(t, s.Down(t0), "down before a first ready answer")
	assert.Nil(t, s.Last())

	s.Observe(notReady, nil, t0)
	assert.Same(t, notReady, s.Last())
	assert.True(t, s.NeverReady(), "a not-ready answer is not ready")

	s.Observe(ready, nil, t0.Add(time.Second))
	assert.False(t, s.Down(t0.Add(time.Second)))
	s.Observe(nil, fail, t0.Add(20*time.Second))
	assert.Same(t, ready, s.Last(), "a failed call leaves the last answer")
	assert.False(t, s.Down(t0.Add(30*time.Second)), "29s since the ready answer")
	assert.True(t, s.Down(t0.Add(31*time.Second)), "30s since the ready answer")

	s.Observe(notReady, nil, t0.Add(40*time.Second))
	assert.Same(t, notReady, s.Last())
	assert.True(t, s.Down(t0.Add(40*time.Second)), "not ready since 39s")
	assert.False(t, s.NeverReady())
}
