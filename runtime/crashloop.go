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
	last := lastExit(b, c, st)
	if last == nil {
		return "", nil
	}
	if msg, left, ok := inBackOff(b, pod, c, last); ok {
		return msg, &backOffError{err: fmt.Errorf("%w: %s", ErrCrashLoopBackOff, msg), left: left}
	}
	b.Next(BackoffKey(pod, c), last.FinishedAt)
	return "", nil
}

// InCrashLoopBackOff reports whether CrashLoopBackOff would refuse to start
// c now, with its message and the wait left, without recording anything:
// status generation uses it to show the container waiting with reason
// CrashLoopBackOff from the sync that finds it backing off, rather than
// from a later one.
func InCrashLoopBackOff(b *Backoff, pod *v1.Pod, c *v1.Container, st *PodStatus) (msg string, left time.Duration, ok bool) {
	last := lastExit(b, c, st)
	if last == nil {
		return "", 0, false
	}
	return inBackOff(b, pod, c, last)
}

// lastExit is the newest exited instance of c in st, nil if none (or b or
// st is nil: nothing waits).
func lastExit(b *Backoff, c *v1.Container, st *PodStatus) *ContainerStatus {
	if b == nil || st == nil || c == nil {
		return nil
	}
	for _, cs := range st.ContainerStatuses {
		if cs.Name == c.Name && cs.State == ContainerStateExited {
			return cs // newest first: the latest exit
		}
	}
	return nil
}

func inBackOff(b *Backoff, pod *v1.Pod, c *v1.Container, last *ContainerStatus) (string, time.Duration, bool) {
	key := BackoffKey(pod, c)
	delay, left := b.remainingSince(key, last.FinishedAt)
	if left <= 0 {
		return "", 0, false
	}
	return fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.Name, pod.Name, pod.Namespace, pod.UID), left, true
}

// backOffError is a back-off's refusal (a crash loop's, an image pull's),
// with the wait it has left.
type backOffError struct {
	err  error
	left time.Duration
}

func (e *backOffError) Error() string { return e.err.Error() }
func (e *backOffError) Unwrap() error { return e.err }

// BackOffError wraps err, a back-off's refusal (wrapping
// ErrCrashLoopBackOff or ErrImagePullBackOff), with the wait left, so that
// BackOffRemaining can tell it; a runtime's SyncPod returns it so the agent
// syncs the pod again when the back-off ends.
func BackOffError(err error, left time.Duration) error {
	return &backOffError{err: err, left: max(0, left)}
}

// BackOffRemaining returns how long the back-off that err (from
// CrashLoopBackOff or BackOffError, possibly wrapped) had left when it was
// refused, and false for an error that does not say.
func BackOffRemaining(err error) (time.Duration, bool) {
	var be *backOffError
	if errors.As(err, &be) {
		return be.left, true
	}
	return 0, false
}
