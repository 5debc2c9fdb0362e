// Package runtimestate tracks what a node agent knows of its runtime's
// health (the kubelet's runtime state), shared by the agent and the node
// controller.
package runtimestate

import (
	"time"

	"github.com/nodekit/nodekit/runtime"
)

// State is what a node agent knows of its runtime's health, as the
// kubelet's runtime state: the runtime's last answer to Status, and when it
// last answered with RuntimeReady. A failed Status call leaves the last
// answer standing; the runtime is down only once it has not answered ready
// for DownAfter (the kubelet's maxWaitForContainerRuntime, 30s), so one
// slow or failed call changes nothing. Not safe for concurrent use.
type State struct {
	// DownAfter is how long without a ready answer makes the runtime down.
	DownAfter time.Duration

	last    *runtime.RuntimeStatus
	readyAt time.Time
}

// Observe records an answer to Status at now; a failed call (err, or no
// status) is ignored.
func (s *State) Observe(st *runtime.RuntimeStatus, err error, now time.Time) {
	if err != nil || st == nil {
		return
	}
	s.last = st
	if rc := st.Condition(runtime.RuntimeReady); rc != nil && rc.Status {
		s.readyAt = now
	}
}

// Last returns the last answer, nil before the first.
func (s *State) Last() *runtime.RuntimeStatus { return s.last }

// NeverReady reports whether the runtime has not answered ready yet.
func (s *State) NeverReady() bool { return s.readyAt.IsZero() }

// Down reports whether the runtime has not answered ready for DownAfter as
// of now, or never has.
func (s *State) Down(now time.Time) bool {
	return s.readyAt.IsZero() || !s.readyAt.Add(s.DownAfter).After(now)
}
