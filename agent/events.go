package agent

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/safeevent"
	"github.com/nodekit/nodekit/podutil"
)

// event records an event about pod on Config.Recorder, if any; a panicking
// recorder is logged, not propagated.
func (a *Agent) event(pod *v1.Pod, eventType, reason, msgFmt string, args ...any) {
	if err := safeevent.Eventf(a.cfg.Recorder, pod, eventType, reason, msgFmt, args...); err != nil {
		a.log.Error(err, "Cannot record event", "pod", podutil.FullName(pod), "reason", reason)
	}
}
