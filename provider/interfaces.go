package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// PodLifecycleHandler is virtual-kubelet's node.PodLifecycleHandler, method
// for method, so a virtual-kubelet provider satisfies it as it is. The
// adapter calls it as virtual-kubelet's PodController does:
//
//   - CreatePod when the pod is not known to the provider (GetPod returns
//     nil), UpdatePod when it is and one of the fields virtual-kubelet passes
//     on changed (containers', init and ephemeral containers' specs,
//     activeDeadlineSeconds, tolerations, labels, annotations);
//   - DeletePod when the pod is deleted or must stop, with
//     DeletionGracePeriodSeconds set to the grace period; it may be called
//     again for the same pod;
//   - GetPodStatus for the status of a pod, GetPods once at start to find
//     pods that ran before.
//
// Errors that mean "no such pod" should have a NotFound() bool method
// returning true (virtual-kubelet's errdefs.NotFound does) or wrap
// runtime.ErrNotFound. Pods and statuses returned are treated as read only.
type PodLifecycleHandler interface {
	// CreatePod takes a Kubernetes Pod and deploys it within the provider.
	CreatePod(ctx context.Context, pod *v1.Pod) error
	// UpdatePod takes a Kubernetes Pod and updates it within the provider.
	UpdatePod(ctx context.Context, pod *v1.Pod) error
	// DeletePod takes a Kubernetes Pod and deletes it from the provider.
	DeletePod(ctx context.Context, pod *v1.Pod) error
	// GetPod retrieves a pod by name from the provider (can be cached).
	GetPod(ctx context.Context, namespace, name string) (*v1.Pod, error)
	// GetPodStatus retrieves the status of a pod by name from the provider.
	GetPodStatus(ctx context.Context, namespace, name string) (*v1.PodStatus, error)
	// GetPods retrieves a list of all pods running on the provider (can be
	// cached).
	GetPods(context.Context) ([]*v1.Pod, error)
}

// PodNotifier is virtual-kubelet's node.PodNotifier: a provider that pushes
// status changes. NotifyPods is called once, when the agent starts to
// stream the runtime's events; each call of the callback with a pod whose
// status changed goes straight to the pod's worker. A provider without it
// is polled (Config.PollPeriod).
type PodNotifier interface {
	// NotifyPods registers the callback; it must not block.
	NotifyPods(context.Context, func(*v1.Pod))
}

// NodeProvider is virtual-kubelet's node.NodeProvider. It has the method
// set of node.Provider: give the same value to agent.Config.Node.Provider,
// and a failing Ping makes the node NotReady while NotifyNodeStatus pushes
// node status changes at once.
type NodeProvider interface {
	// Ping checks if the node is still active.
	Ping(context.Context) error
	// NotifyNodeStatus registers a callback for node status changes; it
	// must not block.
	NotifyNodeStatus(ctx context.Context, cb func(*v1.Node))
}
