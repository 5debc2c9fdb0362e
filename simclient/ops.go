package simclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"
)

// get returns a stored object; the caller must not change it.
func (s *Server) get(r *resource, ns, name string) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.tables[r.gvr].objs[nsName{ns, name}]
	if !ok {
		return nil, notFound(r, name)
	}
	return o, nil
}

func (s *Server) nextRV() string {
	s.rv++
	return strconv.FormatUint(s.rv, 10)
}

// create stores a new object (obj is the caller's no more).
func (s *Server) create(r *resource, ns string, obj runtime.Object) (runtime.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if r.namespaced {
		if m.GetNamespace() != "" && m.GetNamespace() != ns {
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		m.SetNamespace(ns)
	} else {
		m.SetNamespace("")
	}
	if m.GetName() == "" && m.GetGenerateName() == "" {
		return nil, apierrors.NewInvalid(r.gvk.GroupKind(), "", nil)
	}
	if r.sim {
		if err := s.terminating(r, ns); err != nil {
			return nil, err
		}
		return s.simCreate(r, ns, obj)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.terminatingLocked(r, ns); err != nil {
		return nil, err
	}
	if n, ok := obj.(*corev1.Namespace); ok {
		defaultNamespace(n)
	}
	if m.GetName() == "" {
		// Keyed by the prefix: controllers generating names in one instant
		// get the same names in every run.
		m.SetName(m.GetGenerateName() + nameSuffix(s.keyed("name", r.gvr.String(), ns, m.GetGenerateName())))
	}
	t := s.tables[r.gvr]
	k := nsName{ns, m.GetName()}
	if _, ok := t.objs[k]; ok {
		return nil, apierrors.NewAlreadyExists(r.gvr.GroupResource(), k.name)
	}
	m.SetUID(uidFrom(s.keyed("uid", r.gvr.String(), k.namespace, k.name)))
	m.SetCreationTimestamp(s.now())
	m.SetGeneration(1)
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetResourceVersion(s.nextRV())
	t.apply(watch.Added, obj, nil)
	return obj, nil
}

// update replaces an object (sub "") or its status (sub "status").
func (s *Server) update(r *resource, ns, name string, obj runtime.Object, sub string) (runtime.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if m.GetName() != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), name))
	}
	if r.namespaced {
		if m.GetNamespace() != "" && m.GetNamespace() != ns {
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		m.SetNamespace(ns)
	} else {
		m.SetNamespace("")
	}
	if r.sim {
		return s.simUpdate(r, ns, name, obj, sub)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[r.gvr]
	old, ok := t.objs[nsName{ns, name}]
	if !ok {
		return nil, notFound(r, name)
	}
	om := objectMeta(old)
	if rv := m.GetResourceVersion(); rv != "" && rv != om.GetResourceVersion() {
		return nil, conflict(r, name, "the object has been modified; please apply your changes to the latest version and try again")
	}
	if m.GetUID() != "" && m.GetUID() != om.GetUID() {
		return nil, conflict(r, name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", m.GetUID(), om.GetUID()))
	}
	nw, err := merged(r, old, obj, sub)
	if err != nil {
		return nil, err
	}
	if same(old, nw) {
		return old, nil // a no-op: no new resourceVersion, no event
	}
	finalized := true
	if n, ok := nw.(*corev1.Namespace); ok {
		// spec.finalizers change through the namespace controller
		// (namespacePass) only, as through the apiserver's finalize
		// subresource.
		n.Spec.Finalizers = old.(*corev1.Namespace).Spec.Finalizers
		finalized = len(n.Spec.Finalizers) == 0
	}
	nm := objectMeta(nw)
	nm.SetResourceVersion(s.nextRV())
	if nm.GetDeletionTimestamp() != nil && len(nm.GetFinalizers()) == 0 && finalized {
		t.apply(watch.Deleted, nw, old)
		s.wakeGC()
		return nw, nil
	}
	t.apply(watch.Modified, nw, old)
	return nw, nil
}

// merged is what an update stores: the main resource keeps the stored
// status (if r has a status subresource), the status subresource changes
// the status alone, and the metadata the API owns stays.
func merged(r *resource, old, obj runtime.Object, sub string) (runtime.Object, error) {
	if sub == "status" {
		if !r.status {
			return nil, apierrors.NewNotFound(r.gvr.GroupResource(), "status")
		}
		nw := old.DeepCopyObject()
		if err := copyStatus(nw, obj); err != nil {
			return nil, err
		}
		return nw, nil
	}
	nw := obj
	if r.status {
		if err := copyStatus(nw, old); err != nil {
			return nil, err
		}
	}
	om, nm := objectMeta(old), objectMeta(nw)
	nm.SetUID(om.GetUID())
	nm.SetCreationTimestamp(om.GetCreationTimestamp())
	nm.SetDeletionTimestamp(om.GetDeletionTimestamp())
	nm.SetDeletionGracePeriodSeconds(om.GetDeletionGracePeriodSeconds())
	nm.SetGeneration(om.GetGeneration())
	if !sameSpec(old, nw) {
		nm.SetGeneration(om.GetGeneration() + 1)
	}
	return nw, nil
}

// copyStatus sets dst's status to src's.
func copyStatus(dst, src runtime.Object) error {
	if du, ok := dst.(*unstructured.Unstructured); ok {
		su, ok := src.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("simclient: status of %T into unstructured", src)
		}
		if st, ok := su.Object["status"]; ok {
			du.Object["status"] = runtime.DeepCopyJSONValue(st)
		} else {
			delete(du.Object, "status")
		}
		return nil
	}
	dv, sv := reflect.ValueOf(dst).Elem().FieldByName("Status"), reflect.ValueOf(src).Elem().FieldByName("Status")
	if !dv.IsValid() || !sv.IsValid() || dv.Type() != sv.Type() {
		return fmt.Errorf("simclient: %T has no status", dst)
	}
	// A deep copy through JSON's own types would do; reflect.Copy is
	// shallow, so go through the object's DeepCopy.
	cp := reflect.ValueOf(src.DeepCopyObject()).Elem().FieldByName("Status")
	dv.Set(cp)
	return nil
}

// content is an object as a map without the fields that an update
// ignores or the API sets.
func content(o runtime.Object, drop ...string) map[string]any {
	var m map[string]any
	if u, ok := o.(*unstructured.Unstructured); ok {
		m = runtime.DeepCopyJSON(u.Object)
	} else {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(o); err != nil {
			return nil
		}
	}
	delete(m, "apiVersion")
	delete(m, "kind")
	for _, d := range drop {
		delete(m, d)
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "resourceVersion")
		delete(md, "managedFields")
	}
	return m
}

// same reports an update that changes nothing.
func same(a, b runtime.Object) bool {
	return equality.Semantic.DeepEqual(content(a), content(b))
}

// sameSpec reports an update that leaves all but metadata and status,
// which is what raises metadata.generation.
func sameSpec(a, b runtime.Object) bool {
	return equality.Semantic.DeepEqual(content(a, "metadata", "status"), content(b, "metadata", "status"))
}

// del deletes an object as the apiserver does: with finalizers (or
// foreground propagation) it is marked deleted and stays until they are
// gone; the garbage collector then deletes its dependents.
func (s *Server) del(r *resource, ns, name string, opts metav1.DeleteOptions) (runtime.Object, error) {
	if r.sim {
		return s.simDelete(r, ns, name, opts)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[r.gvr]
	old, ok := t.objs[nsName{ns, name}]
	if !ok {
		return nil, notFound(r, name)
	}
	om := objectMeta(old)
	if err := preconditions(r, name, om, opts); err != nil {
		return nil, err
	}
	if om.GetDeletionTimestamp() != nil {
		return old, nil
	}
	if n, ok := old.(*corev1.Namespace); ok && len(n.Spec.Finalizers) > 0 {
		return s.markNamespaceLocked(t, n), nil
	}
	fins := om.GetFinalizers()
	policy := metav1.DeletePropagationBackground
	if opts.PropagationPolicy != nil {
		policy = *opts.PropagationPolicy
	}
	switch policy {
	case metav1.DeletePropagationForeground:
		if !slices.Contains(fins, metav1.FinalizerDeleteDependents) {
			fins = append(slices.Clone(fins), metav1.FinalizerDeleteDependents)
		}
	case metav1.DeletePropagationOrphan:
		s.orphanLocked(om.GetUID())
	}
	if len(fins) > 0 {
		nw := old.DeepCopyObject()
		nm := objectMeta(nw)
		now := s.now()
		nm.SetDeletionTimestamp(&now)
		nm.SetDeletionGracePeriodSeconds(new(int64))
		nm.SetFinalizers(fins)
		nm.SetGeneration(om.GetGeneration() + 1)
		nm.SetResourceVersion(s.nextRV())
		t.apply(watch.Modified, nw, old)
		s.wakeGC()
		return nw, nil
	}
	gone := old.DeepCopyObject()
	objectMeta(gone).SetResourceVersion(s.nextRV())
	t.apply(watch.Deleted, gone, old)
	s.wakeGC()
	return gone, nil
}

func preconditions(r *resource, name string, m metav1.Object, opts metav1.DeleteOptions) error {
	if pc := opts.Preconditions; pc != nil {
		if pc.UID != nil && *pc.UID != m.GetUID() {
			return conflict(r, name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", *pc.UID, m.GetUID()))
		}
		if pc.ResourceVersion != nil && *pc.ResourceVersion != m.GetResourceVersion() {
			return conflict(r, name, fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", *pc.ResourceVersion, m.GetResourceVersion()))
		}
	}
	return nil
}

// orphanLocked removes the owner references to uid from the Server's own
// objects (sim's pods keep theirs: the orphan policy is not applied to
// them); s.mu is held.
func (s *Server) orphanLocked(uid types.UID) {
	for _, t := range s.tables {
		if t.res.sim {
			continue
		}
		for _, o := range t.list(&filter{labels: everything, fields: noFields, fieldsOf: metaFields}) {
			refs := objectMeta(o).GetOwnerReferences()
			i := slices.IndexFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == uid })
			if i < 0 {
				continue
			}
			nw := o.DeepCopyObject()
			nm := objectMeta(nw)
			nm.SetOwnerReferences(slices.Delete(slices.Clone(refs), i, i+1))
			nm.SetResourceVersion(s.nextRV())
			t.apply(watch.Modified, nw, o)
		}
	}
}

// --- sim's kinds: the writes go to sim's Store, whose feed fills the
// tables (simChanged) before the call returns.

func (s *Server) simCreate(r *resource, ns string, obj runtime.Object) (runtime.Object, error) {
	ctx := context.Background()
	st := s.store
	switch o := obj.(type) {
	case *corev1.Pod:
		return st.Pods(ns).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Node:
		return st.Nodes().Create(ctx, o, metav1.CreateOptions{})
	case *coordinationv1.Lease:
		return st.Leases(ns).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Event:
		return st.Events(ns).Create(ctx, o, metav1.CreateOptions{})
	}
	return nil, apierrors.NewMethodNotSupported(r.gvr.GroupResource(), "create")
}

func (s *Server) simUpdate(r *resource, ns, name string, obj runtime.Object, sub string) (runtime.Object, error) {
	ctx := context.Background()
	st := s.store
	cur, err := s.get(r, ns, name)
	if err != nil {
		return nil, err
	}
	if rv := objectMeta(obj).GetResourceVersion(); rv == "" || rv == objectMeta(cur).GetResourceVersion() {
		if nw, err := merged(r, cur, obj.DeepCopyObject(), sub); err == nil && same(cur, nw) {
			return cur, nil // a no-op
		}
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		if sub == "status" {
			return st.Pods(ns).UpdateStatus(ctx, o, metav1.UpdateOptions{})
		}
		return st.Pods(ns).Update(ctx, o, metav1.UpdateOptions{})
	case *corev1.Node:
		if sub == "status" {
			return st.Nodes().UpdateStatus(ctx, o, metav1.UpdateOptions{})
		}
		return st.Nodes().Update(ctx, o, metav1.UpdateOptions{})
	case *coordinationv1.Lease:
		if sub == "" {
			return st.Leases(ns).Update(ctx, o, metav1.UpdateOptions{})
		}
	}
	return nil, apierrors.NewMethodNotSupported(r.gvr.GroupResource(), "update")
}

func (s *Server) simDelete(r *resource, ns, name string, opts metav1.DeleteOptions) (runtime.Object, error) {
	if r.gvr != podsGVR {
		return nil, apierrors.NewMethodNotSupported(r.gvr.GroupResource(), "delete")
	}
	if err := s.store.Pods(ns).Delete(context.Background(), name, opts); err != nil {
		return nil, err
	}
	if o, err := s.get(r, ns, name); err == nil {
		return o, nil // deleting gracefully
	}
	return &metav1.Status{Status: metav1.StatusSuccess}, nil
}

// --- patches

// patch applies a JSON, merge, strategic merge or apply patch by reading
// the object, patching it and updating it with its resourceVersion, again
// on a conflict. An apply patch is a merge patch of the applied
// configuration that creates the object when absent (no field ownership).
func (s *Server) patch(r *resource, ns, name string, pt types.PatchType, data []byte, sub string) (runtime.Object, error) {
	if pt == types.ApplyPatchType || pt == types.ApplyCBORPatchType {
		if pt == types.ApplyCBORPatchType {
			return nil, unsupportedPatch(string(pt))
		}
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		data, pt = js, types.MergePatchType
		if _, err := s.get(r, ns, name); apierrors.IsNotFound(err) && sub == "" {
			obj, err := s.decode(r, data)
			if err != nil {
				return nil, err
			}
			if m := objectMeta(obj); m.GetName() == "" {
				m.SetName(name)
			}
			return s.create(r, ns, obj)
		}
	}
	for range 16 {
		cur, err := s.get(r, ns, name)
		if err != nil {
			return nil, err
		}
		curJSON, err := json.Marshal(withKind(cur, r))
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		var out []byte
		switch pt {
		case types.JSONPatchType:
			p, err := jsonpatch.DecodePatch(data)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			out, err = p.Apply(curJSON)
			if err != nil {
				return nil, apierrors.NewBadRequest("json patch: " + err.Error())
			}
		case types.MergePatchType:
			if out, err = jsonpatch.MergePatch(curJSON, data); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
		case types.StrategicMergePatchType:
			if !r.typed {
				return nil, unsupportedPatch(string(pt))
			}
			schemaObj, _ := s.scheme.New(r.gvk)
			if out, err = strategicpatch.StrategicMergePatch(curJSON, data, schemaObj); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
		default:
			return nil, unsupportedPatch(string(pt))
		}
		obj, err := s.decode(r, out)
		if err != nil {
			return nil, err
		}
		curRV := objectMeta(cur).GetResourceVersion()
		m := objectMeta(obj)
		ownRV := m.GetResourceVersion() != "" && m.GetResourceVersion() != curRV
		if !ownRV {
			m.SetResourceVersion(curRV)
		}
		res, err := s.update(r, ns, name, obj, sub)
		if apierrors.IsConflict(err) && !ownRV {
			continue
		}
		return res, err
	}
	return nil, conflict(r, name, "too many conflicts patching")
}

// decode reads a request body as r's kind.
func (s *Server) decode(r *resource, data []byte) (runtime.Object, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if (tm.Kind != "" && tm.Kind != r.gvk.Kind) || (tm.APIVersion != "" && tm.APIVersion != r.gvk.GroupVersion().String()) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s %s is not %s", tm.APIVersion, tm.Kind, r.gvk))
	}
	obj, err := s.newObject(r)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		u.SetGroupVersionKind(r.gvk)
		return u, nil
	}
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	obj.GetObjectKind().SetGroupVersionKind(r.gvk)
	return obj, nil
}

// unsupportedPatch is 415, as the apiserver answers a patch type a
// resource does not take.
func unsupportedPatch(pt string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
		Reason: metav1.StatusReasonUnsupportedMediaType, Message: "the body of the request was in an unknown format: " + pt}}
}
