package agent

import (
	"context"
	"errors"
	"fmt"
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
	cond := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
		Reason: preemptionReasonByKubelet, Message: "Pod was preempted by Kubelet to accommodate a critical pod."}
	for _, pod := range victims {
		if a.cfg.Recorder != nil {
			a.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, admission.ReasonPreempting, "%s", message)
		}
		done, timeout, err := a.killPodNow(pod, nil, failedStatus(admission.ReasonPreempting, message, cond))
		if err != nil {
			a.log.Error(err, "Cannot preempt pod", "pod", podutil.FullName(pod))
			continue
		}
		stops = append(stops, stop{pod, done, timeout})
	}
	for _, s := range stops {
		if a.waitKilled(context.Background(), s.pod, s.done, s.timeout) == nil {
			a.log.Info("Pod preempted", "pod", podutil.FullName(s.pod))
		}
	}
}

// failedStatus is a status function that fails a pod the node stops, with
// reason, message and condition (its transition time is the status
// manager's to set).
func failedStatus(reason, message string, cond v1.PodCondition) func(*v1.PodStatus) {
	return func(s *v1.PodStatus) {
		s.Phase, s.Reason, s.Message = v1.PodFailed, reason, message
		if i := slices.IndexFunc(s.Conditions, func(o v1.PodCondition) bool { return o.Type == cond.Type }); i >= 0 {
			s.Conditions[i] = cond
		} else {
			s.Conditions = append(s.Conditions, cond)
		}
	}
}

// killPodNow asks pod's worker to stop it for good, the node's own kill
// (critical pod preemption, eviction): the pod ends with the status
// statusFn makes, its grace period shortened to grace if set. It returns
// a channel closed once the containers stopped and how long to wait for
// it, as the kubelet's killPodNow: 1.5 times the grace period, 10s at
// least.
func (a *Agent) killPodNow(pod *v1.Pod, grace *int64, statusFn func(*v1.PodStatus)) (chan struct{}, time.Duration, error) {
	done := make(chan struct{})
	err := a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: pod,
		KillPodOptions: &podworkers.KillPodOptions{CompletedCh: done, Evict: true, PodStatusFunc: statusFn, GracePeriodSecondsOverride: grace}})
	if err != nil {
		return nil, 0, err
	}
	g := int64(0)
	if p := pod.Spec.TerminationGracePeriodSeconds; p != nil {
		g = *p
	}
	if grace != nil && *grace < g {
		g = *grace
	}
	return done, max(10*time.Second, time.Duration(g+g/2)*time.Second), nil
}

// errKillTimeout is waitKilled's error.
var errKillTimeout = errors.New("pod did not stop in time")

// waitKilled waits for done for at most timeout on the agent's clock, or
// until ctx ends; on timeout it logs, records an ExceededGracePeriod
// event, as the kubelet's killPodNow, and returns errKillTimeout.
func (a *Agent) waitKilled(ctx context.Context, pod *v1.Pod, done chan struct{}, timeout time.Duration) error {
	t := a.cfg.Clock.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		a.log.Error(nil, "Pod did not stop in time", "pod", podutil.FullName(pod), "timeout", timeout)
		if a.cfg.Recorder != nil {
			a.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, "ExceededGracePeriod", "Container runtime did not kill the pod within specified grace period.")
		}
		return fmt.Errorf("%s after %v: %w", podutil.FullName(pod), timeout, errKillTimeout)
	}
}
