package agent

import (
	"errors"
	"time"
)

// SyncLoopHealthy is the kubelet's syncloop health check: an error once the
// sync loop has not entered an iteration for twice the sync frequency (at
// least 5 minutes). Before Run, or before the loop's first iteration, it
// reports healthy, as the kubelet's.
func (a *Agent) SyncLoopHealthy() error {
	loop := a.loopRef.Load()
	if loop == nil {
		return nil
	}
	entered := loop.LatestLoopEntryTime()
	limit := max(2*a.cfg.SyncFrequency, 5*time.Minute)
	if !entered.IsZero() && a.cfg.Clock.Since(entered) > limit {
		return errors.New("sync Loop took longer than expected")
	}
	return nil
}

// PLEGHealthy reports the PLEG's health: nil if healthy, else the PLEG's
// error (which names the pleg). It is the Agent's node.HealthCheck and fits
// server.HealthCheck too.
func (a *Agent) PLEGHealthy() error { return a.pleg.Healthy() }
