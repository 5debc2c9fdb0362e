package runtime

import (
	"errors"
	"fmt"
	"time"

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
// wait. BackOffRemaining tells from the error how long the wait has left.
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
	if left := b.RemainingSince(key, last.FinishedAt); left > 0 {
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", b.Get(key), c.Name, pod.Name, pod.Namespace, pod.UID)
		return msg, &backOffError{err: fmt.Errorf("%w: %s", ErrCrashLoopBackOff, msg), left: left}
	}
	b.Next(key, last.FinishedAt)
	return "", nil
}

// backOffError is CrashLoopBackOff's refusal, with the wait it has left.
type backOffError struct {
	err  error
	left time.Duration
}

func (e *backOffError) Error() string { return e.err.Error() }
func (e *backOffError) Unwrap() error { return e.err }

// BackOffRemaining returns how long the crash-loop back-off that err
// (from CrashLoopBackOff, possibly wrapped) has left, and false for an
// error that does not say.
func BackOffRemaining(err error) (time.Duration, bool) {
	var be *backOffError
	if errors.As(err, &be) {
		return be.left, true
	}
	return 0, false
}
