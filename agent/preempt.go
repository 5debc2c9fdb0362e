package agent

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/podworkers"
)

// preemptionReasonByKubelet is the DisruptionTarget condition's reason on a
// pod the node itself stopped (v1.PodReasonTerminationByKubelet).
const preemptionReasonByKubelet = "TerminationByKubelet"

// preemptPods stops victims to admit a critical pod, as the kubelet's
// killPodNow for its CriticalPodAdmissionHandler: each is evicted with
// status Failed, reason Preempting and a DisruptionTarget condition, and
// waited for until its containers stopped, for at most 1.5 times its grace
// period (10s at least) on the agent's clock. They are stopped together;
// the kubelet stops one after another. It runs on the sync loop's
// goroutine, which waits, as the kubelet's does.
func (a *Agent) preemptPods(victims []*v1.Pod, message string) {
	type stop struct {
		pod     *v1.Pod
		done    chan struct{}
		timeout time.Duration
	}
	stops := make([]stop, 0, len(victims))
	for _, pod := range victims {
		if a.cfg.Recorder != nil {
			a.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, admission.ReasonPreempting, "%s", message)
		}
		done := make(chan struct{})
		err := a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: pod,
			KillPodOptions: &podworkers.KillPodOptions{CompletedCh: done, Evict: true, PodStatusFunc: func(s *v1.PodStatus) {
				s.Phase, s.Reason, s.Message = v1.PodFailed, admission.ReasonPreempting, message
				// Its transition time is the status manager's to set.
				c := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
					Reason: preemptionReasonByKubelet, Message: "Pod was preempted by Kubelet to accommodate a critical pod."}
				if i := slices.IndexFunc(s.Conditions, func(o v1.PodCondition) bool { return o.Type == c.Type }); i >= 0 {
					s.Conditions[i] = c
				} else {
					s.Conditions = append(s.Conditions, c)
				}
			}}})
		if err != nil {
			a.log.Error(err, "Cannot preempt pod", "pod", podutil.FullName(pod))
			continue
		}
		grace := int64(0)
		if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = *g
		}
		stops = append(stops, stop{pod, done, max(10*time.Second, time.Duration(grace+grace/2)*time.Second)})
	}
	for _, s := range stops {
		t := a.cfg.Clock.NewTimer(s.timeout)
		select {
		case <-s.done:
			a.log.Info("Pod preempted", "pod", podutil.FullName(s.pod))
		case <-t.C():
			a.log.Error(nil, "Preempted pod did not stop in time", "pod", podutil.FullName(s.pod), "timeout", s.timeout)
			if a.cfg.Recorder != nil {
				a.cfg.Recorder.Eventf(s.pod, v1.EventTypeWarning, "ExceededGracePeriod", "Container runtime did not kill the pod within specified grace period.")
			}
		}
		t.Stop()
	}
}
