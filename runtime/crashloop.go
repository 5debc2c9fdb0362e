package runtime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// CrashLoopBackOff is the crash-loop back-off check every container-level
// runtime makes in SyncPod before it starts container c of pod again, as the
// kubelet's doBackOff: the newest exited instance of c in st is the failure;
// while b's delay for the container (BackoffKey) has not passed since that
// instance finished, the start is refused with an error wrapping
// ErrCrashLoopBackOff and the kubelet's message ("back-off 20s restarting
// failed container=c pod=name_ns(uid)"), to record in the start's step:
//
//	if msg, err := runtime.CrashLoopBackOff(b, pod, c, st); err != nil {
//		step.Fail(err, msg)
//		continue
//	}
//
// Otherwise the restart is recorded (the next exit doubles the delay) and
// it returns nil. A container that never exited, a nil b or a nil st never
// wait.
func CrashLoopBackOff(b *Backoff, pod *v1.Pod, c *v1.Container, st *PodStatus) (string, error) {
	if b == nil || st == nil {
		return "", nil
	}
	var last *ContainerStatus
	for _, cs := range st.ContainerStatuses {
		if cs.Name == c.Name && cs.State == ContainerStateExited {
			last = cs // newest first: the latest exit
			break
		}
	}
	if last == nil {
		return "", nil
	}
	key := BackoffKey(pod, c)
	if b.IsInBackOffSince(key, last.FinishedAt) {
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", b.Get(key), c.Name, pod.Name, pod.Namespace, pod.UID)
		return msg, fmt.Errorf("%w: %s", ErrCrashLoopBackOff, msg)
	}
	b.Next(key, last.FinishedAt)
	return "", nil
}
