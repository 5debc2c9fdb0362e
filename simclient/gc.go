package simclient

import (
	"cmp"
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// wakeGC asks the garbage collector for a pass; s.mu is held.
func (s *Server) wakeGC() {
	select {
	case s.gcWake <- struct{}{}:
	default:
	}
}

// collectGarbage is the garbage collector: after each deletion it
// deletes the objects none of whose owners is left (background
// propagation), the dependents of owners deleted in the foreground, and
// removes the foregroundDeletion finalizer of owners with no dependents
// left.
func (s *Server) collectGarbage(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.gcWake:
		}
		s.gcPass()
		s.namespacePass()
	}
}

type target struct {
	res      *resource
	ns, name string
	uid      types.UID
}

func (s *Server) gcPass() {
	s.mu.Lock()
	type state struct{ foreground bool }
	live := map[types.UID]state{}
	for _, t := range s.tables {
		for _, o := range t.objs {
			m := objectMeta(o)
			live[m.GetUID()] = state{foreground: m.GetDeletionTimestamp() != nil && slices.Contains(m.GetFinalizers(), metav1.FinalizerDeleteDependents)}
		}
	}
	var doomed, released []target
	hasDependents := map[types.UID]bool{}
	for _, t := range s.tables {
		for _, o := range t.objs {
			m := objectMeta(o)
			refs := m.GetOwnerReferences()
			if len(refs) == 0 {
				continue
			}
			solid := false
			for _, r := range refs {
				if st, ok := live[r.UID]; ok {
					hasDependents[r.UID] = true
					solid = solid || !st.foreground
				}
			}
			if !solid && m.GetDeletionTimestamp() == nil {
				doomed = append(doomed, target{t.res, m.GetNamespace(), m.GetName(), m.GetUID()})
			}
		}
	}
	for _, t := range s.tables {
		for _, o := range t.objs {
			m := objectMeta(o)
			if live[m.GetUID()].foreground && !hasDependents[m.GetUID()] {
				released = append(released, target{t.res, m.GetNamespace(), m.GetName(), m.GetUID()})
			}
		}
	}
	s.mu.Unlock()
	// In a stable order, so that a seeded run stays reproducible.
	order := func(a, b target) int {
		return cmp.Or(cmp.Compare(a.res.gvr.String(), b.res.gvr.String()), cmp.Compare(a.ns, b.ns), cmp.Compare(a.name, b.name))
	}
	slices.SortFunc(doomed, order)
	slices.SortFunc(released, order)
	bg := metav1.DeletePropagationBackground
	for _, d := range doomed {
		uid := d.uid
		_, err := s.del(d.res, d.ns, d.name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
		_ = err // gone or replaced meanwhile: nothing to do
	}
	for _, r := range released {
		s.release(r)
	}
}

// release removes an owner's foregroundDeletion finalizer, which deletes
// it when it was the last.
func (s *Server) release(t target) {
	for range 16 {
		cur, err := s.get(t.res, t.ns, t.name)
		if err != nil {
			return
		}
		m := objectMeta(cur)
		if m.GetUID() != t.uid {
			return
		}
		nw := cur.DeepCopyObject()
		objectMeta(nw).SetFinalizers(slices.DeleteFunc(slices.Clone(m.GetFinalizers()), func(f string) bool { return f == metav1.FinalizerDeleteDependents }))
		if _, err := s.update(t.res, t.ns, t.name, nw, ""); !apierrors.IsConflict(err) {
			return
		}
	}
}
