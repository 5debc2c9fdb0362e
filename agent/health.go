package agent

import (
	"errors"
	"fmt"
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

// PLEGHealthy reports the PLEG's health as an error, nil if healthy.
func (a *Agent) PLEGHealthy() error {
	if ok, err := a.pleg.Healthy(); !ok {
		if err == nil {
			err = errors.New("PLEG is not healthy")
		}
		return fmt.Errorf("pleg: %w", err)
	}
	return nil
}
