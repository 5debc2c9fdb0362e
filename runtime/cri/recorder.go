package cri

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// RecordsEvents reports whether the manager records the runtime-manager
// events (Config.Recorder is set).
func (m *Manager) RecordsEvents() bool { return m.cfg.Recorder != nil }

// recordContainer records an event about container name of pod, as the
// kubelet's recordContainerEvent: the container's ID in the message is
// replaced by its name, so that events of restarts aggregate. Nothing is
// recorded for a pod that has no such container (an orphan's).
func (m *Manager) recordContainer(pod *v1.Pod, name, id, eventType, reason, msgFmt string, args ...any) {
	if m.cfg.Recorder == nil {
		return
	}
	ref := runtime.ContainerRef(pod, name)
	if ref == nil {
		return
	}
	msg := fmt.Sprintf(msgFmt, args...)
	if id != "" {
		msg = strings.ReplaceAll(msg, id, name)
	}
	if err := runtime.RecordEvent(m.cfg.Recorder, ref, eventType, reason, "%s", msg); err != nil {
		m.log.Error(err, "Cannot record event", "pod", pod.Namespace+"/"+pod.Name, "reason", reason)
	}
}

// podEvent records an event about pod.
func (m *Manager) podEvent(pod *v1.Pod, eventType, reason, msgFmt string, args ...any) {
	if m.cfg.Recorder == nil || pod == nil {
		return
	}
	if err := runtime.RecordEvent(m.cfg.Recorder, pod, eventType, reason, msgFmt, args...); err != nil {
		m.log.Error(err, "Cannot record event", "pod", pod.Namespace+"/"+pod.Name, "reason", reason)
	}
}

// podIP is the pod's first IP, where an httpGet hook without a host goes.
func (m *Manager) podIP(ctx context.Context, pod *v1.Pod) (string, error) {
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return "", err
	}
	if len(st.IPs) == 0 {
		return "", nil
	}
	return st.IPs[0], nil
}
