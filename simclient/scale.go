package simclient

import (
	"encoding/json"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// scale is the autoscaling/v1 Scale of a Deployment, ReplicaSet,
// StatefulSet or ReplicationController.
func (s *Server) scale(rq request) (*autoscalingv1.Scale, error) {
	if !rq.res.scale {
		return nil, notFound(rq.res, rq.name+"/scale")
	}
	obj, err := s.get(rq.res, rq.ns, rq.name)
	if err != nil {
		return nil, err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	m := objectMeta(obj)
	sc := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()},
	}
	replicas, found, _ := unstructured.NestedInt64(u, "spec", "replicas")
	if !found {
		replicas = 1
	}
	sc.Spec.Replicas = int32(replicas)
	st, _, _ := unstructured.NestedInt64(u, "status", "replicas")
	sc.Status.Replicas = int32(st)
	if sel, ok, _ := unstructured.NestedMap(u, "spec", "selector"); ok {
		if _, isLS := sel["matchLabels"]; isLS || sel["matchExpressions"] != nil {
			var ls metav1.LabelSelector
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sel, &ls); err == nil {
				if s, err := metav1.LabelSelectorAsSelector(&ls); err == nil {
					sc.Status.Selector = s.String()
				}
			}
		} else {
			set := labels.Set{}
			for k, v := range sel {
				set[k] = fmt.Sprint(v)
			}
			sc.Status.Selector = set.String()
		}
	}
	return sc, nil
}

// setScale sets spec.replicas from a Scale (its resourceVersion, if set,
// a precondition).
func (s *Server) setScale(rq request, sc *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
	if !rq.res.scale {
		return nil, notFound(rq.res, rq.name+"/scale")
	}
	for range 16 {
		obj, err := s.get(rq.res, rq.ns, rq.name)
		if err != nil {
			return nil, err
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if err := unstructured.SetNestedField(u, int64(sc.Spec.Replicas), "spec", "replicas"); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		nw, _ := s.newObject(rq.res)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, nw); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		own := sc.ResourceVersion != ""
		if own {
			objectMeta(nw).SetResourceVersion(sc.ResourceVersion)
		}
		if _, err := s.update(rq.res, rq.ns, rq.name, nw, ""); err != nil {
			if apierrors.IsConflict(err) && !own {
				continue
			}
			return nil, err
		}
		return s.scale(rq)
	}
	return nil, conflict(rq.res, rq.name, "too many conflicts scaling")
}

func (s *Server) serveScalePatch(w http.ResponseWriter, rq request, pt types.PatchType, data []byte) {
	sc, err := s.scale(rq)
	if err != nil {
		writeError(w, err)
		return
	}
	cur, _ := json.Marshal(sc)
	var out []byte
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(data)
		if err == nil {
			out, err = p.Apply(cur)
		}
		if err != nil {
			writeError(w, apierrors.NewBadRequest(err.Error()))
			return
		}
	case types.MergePatchType, types.StrategicMergePatchType:
		if out, err = jsonpatch.MergePatch(cur, data); err != nil {
			writeError(w, apierrors.NewBadRequest(err.Error()))
			return
		}
	default:
		writeError(w, unsupportedPatch(string(pt)))
		return
	}
	var nw autoscalingv1.Scale
	if err := json.Unmarshal(out, &nw); err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	if nw.ResourceVersion == sc.ResourceVersion {
		nw.ResourceVersion = ""
	}
	res, err := s.setScale(rq, &nw)
	writeAny(w, http.StatusOK, res, err)
}

// disruptionAllowed is the eviction's PodDisruptionBudget check, as the
// disruption controller would count: the healthy (Ready, not deleting)
// pods a budget selects against its minAvailable or maxUnavailable. A pod
// not healthy may always be evicted.
func (s *Server) disruptionAllowed(ns, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pt := s.tables[podsGVR]
	target, ok := pt.objs[nsName{ns, name}].(*corev1.Pod)
	if !ok {
		return apierrors.NewNotFound(podsGVR.GroupResource(), name)
	}
	if !healthy(target) {
		return nil
	}
	var pdbs *table
	for gvr, t := range s.tables {
		if gvr.Group == "policy" && gvr.Version == "v1" && gvr.Resource == "poddisruptionbudgets" {
			pdbs = t
		}
	}
	if pdbs == nil {
		return nil
	}
	for _, o := range pdbs.list(&filter{namespace: ns, labels: everything, fields: noFields, fieldsOf: metaFields}) {
		pdb, ok := o.(*policyv1.PodDisruptionBudget)
		if !ok || pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(target.Labels)) {
			continue
		}
		total, up := 0, 0
		for _, po := range pt.list(&filter{namespace: ns, labels: sel, fields: noFields, fieldsOf: metaFields}) {
			total++
			if healthy(po.(*corev1.Pod)) {
				up++
			}
		}
		want := 0
		switch {
		case pdb.Spec.MinAvailable != nil:
			want, _ = intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, total, true)
		case pdb.Spec.MaxUnavailable != nil:
			mu, _ := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, total, true)
			want = total - mu
		}
		if up-1 < want {
			return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
	}
	return nil
}

func healthy(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
