package provider

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime"
)

// runtimeStatus turns rec's provider status into the runtime's view: one
// ready sandbox while the provider has the pod, one container instance per
// container status, and the status itself as APIStatus.
func (r *Runtime) runtimeStatus(rec *record) *runtime.PodStatus {
	rs := &runtime.PodStatus{ID: rec.uid, Name: rec.name, Namespace: rec.ns, TimeStamp: r.cfg.Clock.Now(), APIStatus: rec.status}
	sb := &runtime.SandboxStatus{ID: string(rec.uid), State: runtime.SandboxStateReady, CreatedAt: rec.createdAt}
	if rec.gone || !rec.known {
		sb.State = runtime.SandboxStateNotReady
	}
	rs.SandboxStatuses = []*runtime.SandboxStatus{sb}
	st := rec.status
	if st == nil {
		return rs
	}
	for _, ip := range st.PodIPs {
		rs.IPs = append(rs.IPs, ip.IP)
	}
	if len(rs.IPs) == 0 && st.PodIP != "" {
		rs.IPs = []string{st.PodIP}
	}
	sb.IPs = rs.IPs
	n := len(st.InitContainerStatuses) + len(st.ContainerStatuses) + len(st.EphemeralContainerStatuses)
	if n == 0 {
		return rs
	}
	all := make([]runtime.ContainerStatus, 0, n)
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses, st.EphemeralContainerStatuses} {
		for i := range list {
			all = append(all, r.containerStatus(rec, &list[i]))
		}
	}
	rs.ContainerStatuses = make([]*runtime.ContainerStatus, len(all))
	for i := range all {
		rs.ContainerStatuses[i] = &all[i]
	}
	return rs
}

func (r *Runtime) containerStatus(rec *record, cs *v1.ContainerStatus) runtime.ContainerStatus {
	id, err := runtime.ParseContainerID(cs.ContainerID)
	if cs.ContainerID == "" || err != nil {
		// Made up, stable per instance: a restart is a new container.
		id = runtime.ContainerID{Type: r.cfg.Type, ID: fmt.Sprintf("%s-%s-%d", rec.uid, cs.Name, cs.RestartCount)}
	}
	out := runtime.ContainerStatus{ID: id, Name: cs.Name, Image: cs.Image, ImageID: cs.ImageID,
		RestartCount: int(cs.RestartCount), SandboxID: string(rec.uid)}
	switch s := cs.State; {
	case s.Running != nil:
		out.State, out.StartedAt = runtime.ContainerStateRunning, s.Running.StartedAt.Time
	case s.Terminated != nil:
		out.State = runtime.ContainerStateExited
		out.StartedAt, out.FinishedAt = s.Terminated.StartedAt.Time, s.Terminated.FinishedAt.Time
		out.ExitCode, out.Reason, out.Message = int(s.Terminated.ExitCode), s.Terminated.Reason, s.Terminated.Message
	default:
		out.State, out.Reason = runtime.ContainerStateCreated, runtime.ReasonContainerCreating
		if s.Waiting != nil {
			out.Message = s.Waiting.Message
		}
	}
	out.CreatedAt = out.StartedAt
	return out
}

// terminal reports whether the status's phase is Succeeded or Failed.
func terminal(st *v1.PodStatus) bool {
	return st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed
}

// stopped reports whether nothing of the pod runs: a terminal phase, or
// every container terminated.
func stopped(st *v1.PodStatus) bool {
	if terminal(st) {
		return true
	}
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses, st.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].State.Terminated == nil && list[i].State.Waiting == nil {
				return false
			}
		}
	}
	return true
}

// Virtual-kubelet's texts for pods the provider lost or deleted without
// reporting it.
const (
	reasonNotFound             = "NotFound"
	messageNotFound            = "The pod status was not found and may have been deleted from the provider"
	containerMessageNotFound   = "Container was not found and was likely deleted"
	exitCodeNotFound           = -137
	reasonTerminated           = "Terminated"
	containerMessageTerminated = "Container was terminated. The exit code may not reflect the real exit code"
)

// notFoundStatus is virtual-kubelet's status of a pod its provider lost:
// Failed, running containers terminated with exit code -137.
func notFoundStatus(old *v1.PodStatus, now time.Time) *v1.PodStatus {
	st := &v1.PodStatus{}
	if old != nil {
		st = old.DeepCopy()
	}
	st.Phase, st.Reason, st.Message = v1.PodFailed, reasonNotFound, messageNotFound
	t := metav1.NewTime(now)
	for i := range st.ContainerStatuses {
		c := &st.ContainerStatuses[i]
		if c.State.Running == nil {
			continue
		}
		c.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: exitCodeNotFound,
			Reason: reasonNotFound, Message: containerMessageNotFound, StartedAt: c.State.Running.StartedAt,
			FinishedAt: t, ContainerID: c.ContainerID}}
		c.Ready = false
	}
	return st
}

// deletedStatus is virtual-kubelet's status of a pod deleted from a
// provider that did not report a final one: Succeeded, every container
// terminated with reason Terminated.
func deletedStatus(old *v1.PodStatus, now time.Time) *v1.PodStatus {
	st := &v1.PodStatus{}
	if old != nil {
		st = old.DeepCopy()
	}
	if !terminal(st) {
		st.Phase, st.Reason = v1.PodSucceeded, reasonTerminated
	}
	t := metav1.NewTime(now)
	for i := range st.ContainerStatuses {
		c := &st.ContainerStatuses[i]
		if c.State.Terminated != nil {
			continue
		}
		term := &v1.ContainerStateTerminated{Reason: reasonTerminated, Message: containerMessageTerminated, FinishedAt: t, ContainerID: c.ContainerID}
		if c.State.Running != nil {
			term.StartedAt = c.State.Running.StartedAt
		}
		c.State, c.Ready = v1.ContainerState{Terminated: term}, false
	}
	return st
}

// failedStatus is virtual-kubelet's status after a failed CreatePod or
// UpdatePod: the pod's status with phase Pending (Failed under restart
// policy Never), reason ProviderFailed and the error as message.
func failedStatus(pod *v1.Pod, err error) *v1.PodStatus {
	st := pod.Status.DeepCopy()
	st.Phase = v1.PodPending
	if pod.Spec.RestartPolicy == v1.RestartPolicyNever {
		st.Phase = v1.PodFailed
	}
	st.Reason, st.Message = ReasonProviderFailed, err.Error()
	return st
}
