package status

import (
	"encoding/json"
	"reflect"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podutil"
)

// marshalPatch is the strategic-merge patch of the status subresource
// that sets fields (statusChanges), with the pod's UID as precondition (as
// the kubelet's PatchPodStatus).
func marshalPatch(uid types.UID, fields map[string]any) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid},
		"status":   fields,
	})
}

// statusChanges is what a patch must set to turn api into status, in the
// fields the agent owns; nil when nothing changes. Conditions are patched
// one by one (merge key "type"), so that conditions others add meanwhile
// survive; pod and host IPs are replaced as a whole; other lists are
// atomic in the API anyway.
func statusChanges(api, status *v1.PodStatus) map[string]any {
	var fields map[string]any
	set := func(name string, differ bool, v any, empty bool) {
		if !differ {
			return
		}
		if fields == nil {
			fields = map[string]any{}
		}
		if empty {
			fields[name] = nil
		} else {
			fields[name] = v
		}
	}
	// Plain equality is the cheap common case (see normalizeStatus); the
	// semantic one catches equal times in other locations, nil and empty.
	eq := func(a, b any) bool { return reflect.DeepEqual(a, b) || apiequality.Semantic.DeepEqual(a, b) }

	if status.ObservedGeneration > 0 && status.ObservedGeneration != api.ObservedGeneration {
		set("observedGeneration", true, status.ObservedGeneration, false)
	}
	set("phase", api.Phase != status.Phase, status.Phase, status.Phase == "")
	set("reason", api.Reason != status.Reason, status.Reason, status.Reason == "")
	set("message", api.Message != status.Message, status.Message, status.Message == "")
	set("hostIP", api.HostIP != status.HostIP, status.HostIP, status.HostIP == "")
	set("podIP", api.PodIP != status.PodIP, status.PodIP, status.PodIP == "")
	set("qosClass", api.QOSClass != status.QOSClass, status.QOSClass, status.QOSClass == "")
	set("startTime", !eq(api.StartTime, status.StartTime), status.StartTime, status.StartTime == nil)
	set("containerStatuses", !eq(api.ContainerStatuses, status.ContainerStatuses), status.ContainerStatuses, len(status.ContainerStatuses) == 0)
	set("initContainerStatuses", !eq(api.InitContainerStatuses, status.InitContainerStatuses), status.InitContainerStatuses, len(status.InitContainerStatuses) == 0)
	set("ephemeralContainerStatuses", !eq(api.EphemeralContainerStatuses, status.EphemeralContainerStatuses), status.EphemeralContainerStatuses, len(status.EphemeralContainerStatuses) == 0)
	podIPsKept, hostIPsKept := derivedIPLists(api, status)
	if !eq(api.PodIPs, status.PodIPs) && !podIPsKept {
		set("podIPs", true, replaceList(status.PodIPs), false)
	}
	if !eq(api.HostIPs, status.HostIPs) && !hostIPsKept {
		set("hostIPs", true, replaceList(status.HostIPs), false)
	}

	var conds []any
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if _, ac := findCondition(api.Conditions, c.Type); ac == nil || !eq(ac, c) {
			conds = append(conds, conditionPatch(ac, c))
		}
	}
	for i := range api.Conditions {
		t := api.Conditions[i].Type
		if _, c := findCondition(status.Conditions, t); c == nil && ownedByAgent(t) {
			conds = append(conds, map[string]any{"type": t, "$patch": "delete"})
		}
	}
	if len(conds) > 0 {
		set("conditions", true, conds, false)
	}
	return fields
}

// derivedIPLists reports whether api's podIPs and hostIPs are lists the
// apiserver derived from status's single IP: a status with a single IP and
// no list (a provider's, as virtual-kubelet's mock sets) has in the
// apiserver the list of that IP, its conversion filling one from the
// other. Such a list is no change and stays.
func derivedIPLists(api, status *v1.PodStatus) (pod, host bool) {
	pod = len(status.PodIPs) == 0 && singleIP(len(api.PodIPs), func(i int) string { return api.PodIPs[i].IP }, status.PodIP)
	host = len(status.HostIPs) == 0 && singleIP(len(api.HostIPs), func(i int) string { return api.HostIPs[i].IP }, status.HostIP)
	return pod, host
}

// updatedStatus is the status the apiserver makes of api with the patch
// statusChanges(api, status) gives: what an update
// (Config.UpdateKnownStatus) sends in its place. The fields the patch leaves alone (those others own, such as
// nominatedNodeName or resourceClaimStatuses) keep api's values; conditions
// are merged by type as the patch's are, a changed one in its place and a
// new one at the end.
func updatedStatus(api, status *v1.PodStatus) v1.PodStatus {
	out := *api
	if status.ObservedGeneration > 0 {
		out.ObservedGeneration = status.ObservedGeneration
	}
	out.Phase, out.Reason, out.Message = status.Phase, status.Reason, status.Message
	out.HostIP, out.PodIP, out.QOSClass, out.StartTime = status.HostIP, status.PodIP, status.QOSClass, status.StartTime
	out.ContainerStatuses = status.ContainerStatuses
	out.InitContainerStatuses = status.InitContainerStatuses
	out.EphemeralContainerStatuses = status.EphemeralContainerStatuses
	podIPsKept, hostIPsKept := derivedIPLists(api, status)
	if !podIPsKept {
		out.PodIPs = status.PodIPs
	}
	if !hostIPsKept {
		out.HostIPs = status.HostIPs
	}
	conds := make([]v1.PodCondition, 0, len(api.Conditions)+len(status.Conditions))
	for i := range api.Conditions {
		c := api.Conditions[i]
		if _, sc := findCondition(status.Conditions, c.Type); sc != nil {
			c = *sc
		} else if ownedByAgent(c.Type) {
			continue
		}
		conds = append(conds, c)
	}
	for i := range status.Conditions {
		if _, ac := findCondition(api.Conditions, status.Conditions[i].Type); ac == nil {
			conds = append(conds, status.Conditions[i])
		}
	}
	out.Conditions = conds
	return out
}

// updateBody is the pod an update of api's status to status sends: api's
// metadata with its resourceVersion as the precondition, without the
// annotations podconfig adds to the agent's copy of an apiserver pod
// (config.source and config.seen: the apiserver would store them; static
// pods, whose mirrors carry config.source, are never updated so) or the
// managed fields (the apiserver keeps its own for a subresource).
func updateBody(api *v1.Pod, status v1.PodStatus) *v1.Pod {
	body := &v1.Pod{TypeMeta: api.TypeMeta, ObjectMeta: api.ObjectMeta, Spec: api.Spec, Status: status}
	body.ManagedFields = nil
	_, src := api.Annotations[podutil.ConfigSourceAnnotationKey]
	_, seen := api.Annotations[podutil.ConfigFirstSeenAnnotationKey]
	if src || seen {
		body.Annotations = make(map[string]string, len(api.Annotations))
		for k, v := range api.Annotations {
			if k != podutil.ConfigSourceAnnotationKey && k != podutil.ConfigFirstSeenAnnotationKey {
				body.Annotations[k] = v
			}
		}
	}
	return body
}

// conditionPatch is c as a merge item; a reason or message that c drops
// is sent as null, or the merge would keep the stale one.
func conditionPatch(api, c *v1.PodCondition) any {
	if api == nil || (api.Reason == "" || c.Reason != "") && (api.Message == "" || c.Message != "") {
		return c
	}
	m := map[string]any{"type": c.Type, "status": c.Status}
	if !c.LastProbeTime.IsZero() {
		m["lastProbeTime"] = c.LastProbeTime
	}
	if !c.LastTransitionTime.IsZero() {
		m["lastTransitionTime"] = c.LastTransitionTime
	}
	if c.ObservedGeneration != 0 {
		m["observedGeneration"] = c.ObservedGeneration
	}
	m["reason"], m["message"] = nilIfEmpty(c.Reason), nilIfEmpty(c.Message)
	return m
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// replaceList is a strategic-merge list that replaces the whole list.
func replaceList[T any](items []T) []any {
	out := make([]any, 0, len(items)+1)
	out = append(out, map[string]string{"$patch": "replace"})
	for i := range items {
		out = append(out, items[i])
	}
	return out
}

// singleIP reports whether a list of n IPs (the i-th at(i)) is what the
// apiserver derives from the single IP ip: that IP alone, or none.
func singleIP(n int, at func(int) string, ip string) bool {
	if ip == "" {
		return n == 0
	}
	return n == 1 && at(0) == ip
}
