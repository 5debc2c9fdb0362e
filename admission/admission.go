package admission

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Rejection reasons of the built-in handlers, shown in a rejected pod's
// status.
const (
	ReasonOutOfPods                = "OutOfpods"
	ReasonPrivilegedNotAllowed     = "PrivilegedNotAllowed"
	ReasonHostNamespacesNotAllowed = "HostNamespacesNotAllowed"
)

// PodAdmitAttributes is what a handler decides on.
type PodAdmitAttributes struct {
	// Pod is the pod asking to run. Read only.
	Pod *v1.Pod
	// OtherPods are the pods that hold a slot on the node: desired, not
	// terminal, not terminated, Pod excluded; pods admitted earlier in the
	// same batch included. Read only.
	OtherPods []*v1.Pod
	// OtherPodsUsage, if not nil, is the Usage of OtherPods, kept by the
	// caller from pod to pod; GeneralPredicates reads it instead of
	// summing OtherPods again for every pod.
	OtherPodsUsage *Usage
}

// PodAdmitResult is a handler's answer.
type PodAdmitResult struct {
	// Admit is true if the pod may run.
	Admit bool
	// Reason is a CamelCase word for the pod's status.reason when refused.
	Reason string
	// Message says why, for a human.
	Message string
}

// PodAdmitHandler admits or refuses a pod. It is called on the sync loop's
// goroutine, one pod at a time: it must return quickly and not block.
type PodAdmitHandler interface {
	Admit(attrs *PodAdmitAttributes) PodAdmitResult
}

// PodAdmitHandlerFunc is a function that is a PodAdmitHandler.
type PodAdmitHandlerFunc func(attrs *PodAdmitAttributes) PodAdmitResult

// Admit calls f.
func (f PodAdmitHandlerFunc) Admit(attrs *PodAdmitAttributes) PodAdmitResult { return f(attrs) }

// Admit runs handlers in order and returns the first refusal, or an
// admitting result. A nil handler is skipped.
func Admit(handlers []PodAdmitHandler, attrs *PodAdmitAttributes) PodAdmitResult {
	for _, h := range handlers {
		if h == nil {
			continue
		}
		if r := h.Admit(attrs); !r.Admit {
			return r
		}
	}
	return PodAdmitResult{Admit: true}
}

// MaxPods refuses a pod when max pods are active already (reason
// OutOfpods), as the kubelet's pods capacity check.
func MaxPods(max int) PodAdmitHandler {
	return PodAdmitHandlerFunc(func(attrs *PodAdmitAttributes) PodAdmitResult {
		if n := len(attrs.OtherPods); n >= max {
			return PodAdmitResult{Reason: ReasonOutOfPods,
				Message: fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", n, max)}
		}
		return PodAdmitResult{Admit: true}
	})
}

// DenyHostNamespaces refuses pods using the host's network, PID or IPC
// namespace (reason HostNamespacesNotAllowed).
func DenyHostNamespaces() PodAdmitHandler {
	return PodAdmitHandlerFunc(func(attrs *PodAdmitAttributes) PodAdmitResult {
		if s := attrs.Pod.Spec; s.HostNetwork || s.HostPID || s.HostIPC {
			return PodAdmitResult{Reason: ReasonHostNamespacesNotAllowed,
				Message: "pod uses a host namespace (hostNetwork, hostPID or hostIPC) and the node does not allow it"}
		}
		return PodAdmitResult{Admit: true}
	})
}

// DenyPrivileged refuses pods with a privileged container, init and
// ephemeral ones included (reason PrivilegedNotAllowed).
func DenyPrivileged() PodAdmitHandler {
	return PodAdmitHandlerFunc(func(attrs *PodAdmitAttributes) PodAdmitResult {
		if name, ok := privilegedContainer(attrs.Pod); ok {
			return PodAdmitResult{Reason: ReasonPrivilegedNotAllowed,
				Message: fmt.Sprintf("container %q is privileged and the node does not allow privileged containers", name)}
		}
		return PodAdmitResult{Admit: true}
	})
}

func privilegedContainer(pod *v1.Pod) (string, bool) {
	priv := func(sc *v1.SecurityContext) bool { return sc != nil && sc.Privileged != nil && *sc.Privileged }
	for _, c := range pod.Spec.InitContainers {
		if priv(c.SecurityContext) {
			return c.Name, true
		}
	}
	for _, c := range pod.Spec.Containers {
		if priv(c.SecurityContext) {
			return c.Name, true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if priv(c.SecurityContext) {
			return c.Name, true
		}
	}
	return "", false
}
