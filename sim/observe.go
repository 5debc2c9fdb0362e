package sim

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Change is one write to the store as a watch reports it: Added (Old
// nil), Modified, or Deleted (Object the last state, with the
// resourceVersion of its deletion). Object and Old are the store's own:
// read them, never change them.
type Change struct {
	Type        watch.EventType
	Object, Old runtime.Object
}

type observer struct{ fn func(Change) }

// Observe calls fn with every object in the store (pods, Nodes, Leases,
// Events) as Added, then with every write, in resourceVersion order, until
// cancel is called. It is how another API front end (the simclient
// module's client-go transport) serves and watches the objects the agents
// read and write. fn runs under the store's lock: it must not call the
// store and must not block.
func (s *Store) Observe(fn func(Change)) (cancel func()) {
	o := &observer{fn: fn}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pods {
		fn(Change{Type: watch.Added, Object: p})
	}
	for _, n := range s.nodes {
		fn(Change{Type: watch.Added, Object: n})
	}
	for _, l := range s.leases {
		fn(Change{Type: watch.Added, Object: l})
	}
	for _, e := range s.events {
		fn(Change{Type: watch.Added, Object: e})
	}
	s.observers[o] = struct{}{}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.observers, o)
	}
}

// notify tells the observers of a write; s.mu is held. old is nil on
// Added; on Deleted obj is the deleted object.
func (s *Store) notify(t watch.EventType, old, obj runtime.Object) {
	if len(s.observers) == 0 {
		return
	}
	c := Change{Type: t, Object: obj}
	if old != nil && !isNilObject(old) {
		c.Old = old
	}
	for o := range s.observers {
		o.fn(c)
	}
}

// isNilObject reports a typed nil in an interface (an absent old pod).
func isNilObject(o runtime.Object) bool {
	switch o := o.(type) {
	case *v1.Pod:
		return o == nil
	case *v1.Node:
		return o == nil
	case *v1.Event:
		return o == nil
	}
	return false
}

// updatePodStatus replaces a pod's status, as the status subresource's
// update: metadata and spec are kept; a stale resourceVersion or another
// UID is a Conflict.
func (s *Store) updatePodStatus(pod *v1.Pod) (*v1.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{nsOrDefault(pod.Namespace), pod.Name}
	old, ok := s.pods[k]
	if !ok {
		return nil, apierrors.NewNotFound(podsResource, pod.Name)
	}
	if err := checkRV(podsResource, pod.Name, old.ResourceVersion, pod.ResourceVersion); err != nil {
		return nil, err
	}
	if pod.UID != "" && pod.UID != old.UID {
		return nil, apierrors.NewConflict(podsResource, pod.Name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", pod.UID, old.UID))
	}
	p := &v1.Pod{TypeMeta: old.TypeMeta}
	old.ObjectMeta.DeepCopyInto(&p.ObjectMeta)
	old.Spec.DeepCopyInto(&p.Spec)
	pod.Status.DeepCopyInto(&p.Status)
	s.bump(&p.ObjectMeta)
	s.pods[k] = p
	s.emitPod(watch.Modified, old, p)
	return p.DeepCopy(), nil
}

// bindPod binds an unbound pod to a node, as the binding subresource: the
// pod gets spec.nodeName and PodScheduled True; a bound pod is a
// Conflict.
func (s *Store) bindPod(ns, name, node string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.pods[key{ns, name}]
	if !ok {
		return apierrors.NewNotFound(podsResource, name)
	}
	if old.Spec.NodeName != "" {
		return apierrors.NewConflict(podsResource, name, fmt.Errorf("pod %s is already assigned to node %q", name, old.Spec.NodeName))
	}
	if old.DeletionTimestamp != nil {
		return apierrors.NewConflict(podsResource, name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name))
	}
	p := old.DeepCopy()
	p.Spec.NodeName = node
	setCondition(&p.Status.Conditions, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue,
		LastTransitionTime: metaNow(s)})
	s.bump(&p.ObjectMeta)
	s.pods[key{ns, name}] = p
	s.emitPod(watch.Modified, old, p)
	return nil
}

// UpdateStatus replaces a pod's status (the status subresource); a stale
// resourceVersion is a Conflict.
func (c *PodClient) UpdateStatus(_ context.Context, pod *v1.Pod, _ metav1.UpdateOptions) (*v1.Pod, error) {
	p := pod.DeepCopy()
	p.Namespace = c.ns()
	return c.s.updatePodStatus(p)
}

// Bind binds an unbound pod to a node (the binding subresource), for a
// scheduler under test; run the cluster with Config.NoScheduler.
func (c *PodClient) Bind(_ context.Context, b *v1.Binding, _ metav1.CreateOptions) error {
	if b.Target.Name == "" {
		return apierrors.NewBadRequest("binding: target.name is required")
	}
	return c.s.bindPod(c.ns(), b.Name, b.Target.Name)
}

func metaNow(s *Store) metav1.Time { return metav1.NewTime(s.clock.Now().Truncate(time.Second)) }
