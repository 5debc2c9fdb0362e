package agent

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's pod failure for spec.activeDeadlineSeconds.
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// pastActiveDeadline reports whether pod has been active longer than its
// spec.activeDeadlineSeconds, counted from the start time of its status, as
// the kubelet's activeDeadlineHandler does.
func (a *Agent) pastActiveDeadline(pod *v1.Pod) bool {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return false
	}
	st := &pod.Status
	if s, ok := a.status.SharedPodStatus(pod.UID); ok {
		st = s
	}
	if st.StartTime == nil || st.StartTime.IsZero() {
		return false
	}
	return a.cfg.Clock.Since(st.StartTime.Time) >= time.Duration(*pod.Spec.ActiveDeadlineSeconds)*time.Second
}

// failPastDeadline fails a generated status whose pod is past its active
// deadline, with the kubelet's reason and message and a Normal event; the
// pod worker then kills the pod.
func (a *Agent) failPastDeadline(pod *v1.Pod, st *v1.PodStatus) {
	if st.Phase == v1.PodFailed || st.Phase == v1.PodSucceeded || !a.pastActiveDeadline(pod) {
		return
	}
	a.event(pod, v1.EventTypeNormal, ReasonDeadlineExceeded, messageDeadlineExceeded)
	st.Phase, st.Reason, st.Message = v1.PodFailed, ReasonDeadlineExceeded, messageDeadlineExceeded
}

// duePods is the sync loop's DuePods: the pods due in the pod workers'
// queue, plus those past their active deadline and not yet terminal, so that
// the deadline is enforced at the first sync tick after it (the kubelet's
// PodSyncLoopHandlers) rather than at the next resync.
type duePods Agent

func (w *duePods) GetWork() []types.UID {
	a := (*Agent)(w)
	uids := a.queue.GetWork()
	for _, pod := range a.pods.PodsWithActiveDeadline() {
		if !a.pastActiveDeadline(pod) || a.isTerminal(pod) || slices.Contains(uids, pod.UID) {
			continue
		}
		uids = append(uids, pod.UID)
	}
	return uids
}
