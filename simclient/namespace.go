package simclient

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// defaultNamespace gives a new Namespace what the apiserver does: the
// kubernetes finalizer, which the namespace controller removes once the
// namespace is empty, and phase Active.
func defaultNamespace(ns *corev1.Namespace) {
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	}
	ns.Status.Phase = corev1.NamespaceActive
}

// terminatingLocked refuses content for a namespace being deleted, as
// the apiserver's NamespaceLifecycle admission; s.mu is held.
func (s *Server) terminatingLocked(r *resource, ns string) error {
	if !r.namespaced {
		return nil
	}
	t := s.tables[namespacesGVR]
	if t == nil {
		return nil
	}
	o, ok := t.objs[nsName{"", ns}]
	if !ok || objectMeta(o).GetDeletionTimestamp() == nil {
		return nil
	}
	return apierrors.NewForbidden(r.gvr.GroupResource(), "",
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
}

// terminating is terminatingLocked for the writes to sim's Store, made
// without s.mu.
func (s *Server) terminating(r *resource, ns string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.terminatingLocked(r, ns)
}

// markNamespaceLocked starts a namespace's deletion: deletionTimestamp,
// phase Terminating; the namespace controller (namespacePass) empties
// it and then removes it. s.mu is held.
func (s *Server) markNamespaceLocked(t *table, old *corev1.Namespace) *corev1.Namespace {
	nw := old.DeepCopy()
	now := s.now()
	nw.DeletionTimestamp = &now
	nw.DeletionGracePeriodSeconds = new(int64)
	nw.Status.Phase = corev1.NamespaceTerminating
	nw.Generation++
	nw.ResourceVersion = s.nextRV()
	t.apply(watch.Modified, nw, old)
	s.wakeGC()
	return nw
}

// namespacePass is the namespace controller's work, run with the garbage
// collector's: every object of a terminating namespace is deleted (pods
// gracefully, as any client's deletion); once none is left, the
// kubernetes finalizer is removed and, with no other finalizer, the
// namespace is gone. sim's Leases and Events cannot be deleted and do not
// hold it.
func (s *Server) namespacePass() {
	s.mu.Lock()
	nt := s.tables[namespacesGVR]
	if nt == nil {
		s.mu.Unlock()
		return
	}
	terminating := map[string]bool{}
	for k, o := range nt.objs {
		if ns, ok := o.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil && slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
			terminating[k.name] = false // no content seen yet
		}
	}
	if len(terminating) == 0 {
		s.mu.Unlock()
		return
	}
	var doomed []target
	for _, t := range s.tables {
		if !t.res.namespaced || t.res.sim && t.res.gvr != podsGVR {
			continue
		}
		for k, o := range t.objs {
			if _, ok := terminating[k.namespace]; !ok {
				continue
			}
			terminating[k.namespace] = true
			if m := objectMeta(o); m.GetDeletionTimestamp() == nil {
				doomed = append(doomed, target{t.res, k.namespace, k.name, m.GetUID()})
			}
		}
	}
	for name, content := range terminating {
		if !content {
			s.finalizeNamespaceLocked(nt, name)
		}
	}
	s.mu.Unlock()
	// In a stable order, so that a seeded run stays reproducible.
	slices.SortFunc(doomed, func(a, b target) int {
		return cmp.Or(cmp.Compare(a.res.gvr.String(), b.res.gvr.String()), cmp.Compare(a.ns, b.ns), cmp.Compare(a.name, b.name))
	})
	bg := metav1.DeletePropagationBackground
	for _, d := range doomed {
		uid := d.uid
		_, err := s.del(d.res, d.ns, d.name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
		_ = err // gone or replaced meanwhile: the next pass sees it
	}
}

// finalizeNamespaceLocked removes the kubernetes finalizer of an empty
// terminating namespace, and the namespace with it when no finalizer is
// left; s.mu is held.
func (s *Server) finalizeNamespaceLocked(t *table, name string) {
	old, ok := t.objs[nsName{"", name}].(*corev1.Namespace)
	if !ok {
		return
	}
	nw := old.DeepCopy()
	nw.Spec.Finalizers = slices.DeleteFunc(nw.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
	nw.ResourceVersion = s.nextRV()
	if len(nw.Spec.Finalizers) == 0 && len(nw.Finalizers) == 0 {
		t.apply(watch.Deleted, nw, old)
		return
	}
	t.apply(watch.Modified, nw, old)
}
