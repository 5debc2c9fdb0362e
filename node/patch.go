package node

import (
	"context"
	"encoding/json"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodePatcher is what the controller needs, beside NodeClient, to send the
// status as the kubelet does (its PatchNodeStatus): a strategic merge
// patch of the status subresource, which needs no resourceVersion and so
// meets no conflict with others writing the Node. client-go's
// CoreV1().Nodes() has it. The controller finds it on Config.Nodes by type
// assertion; a NodeClient without it gets UpdateStatus, the whole Node
// with its resourceVersion.
type NodePatcher interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Node, error)
}

// patchStatus sends n's status (and the labels the controller put back)
// as a strategic merge patch of the status subresource against old, the
// Node it was computed from.
func (c *Controller) patchStatus(ctx context.Context, p NodePatcher, old, n *v1.Node) (*v1.Node, error) {
	data, err := statusPatch(old, n)
	if err != nil {
		return nil, err
	}
	return p.Patch(ctx, n.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, "status")
}

// statusPatch is the two-way strategic merge patch from old to n in what
// the controller writes, as the kubelet's preparePatchBytesforNodeStatus
// (a two-way merge of the old and new Node with the spec left out): the
// labels, capacity and allocatable key by key (a dropped key as null);
// the conditions that changed, merged by type; the addresses replaced as a
// whole, as the kubelet's fixup does (the API marks them merged by type,
// which would keep an address that went); daemon endpoints, nodeInfo and
// images as they are. No resourceVersion: the patch applies to whatever
// the apiserver holds.
func statusPatch(old, n *v1.Node) ([]byte, error) {
	st := map[string]any{}
	if m := mapPatch(old.Status.Capacity, n.Status.Capacity); m != nil {
		st["capacity"] = m
	}
	if m := mapPatch(old.Status.Allocatable, n.Status.Allocatable); m != nil {
		st["allocatable"] = m
	}
	var conds []any
	for i := range n.Status.Conditions {
		nc := &n.Status.Conditions[i]
		if oc := findCondition(old.Status.Conditions, nc.Type); oc == nil || !conditionEqual(oc, nc) {
			conds = append(conds, map[string]any{
				"type": nc.Type, "status": nc.Status,
				"lastHeartbeatTime": nc.LastHeartbeatTime, "lastTransitionTime": nc.LastTransitionTime,
				"reason": nilIfEmpty(nc.Reason), "message": nilIfEmpty(nc.Message),
			})
		}
	}
	if len(conds) > 0 {
		st["conditions"] = conds
	}
	if !slices.Equal(old.Status.Addresses, n.Status.Addresses) {
		addrs := make([]any, 0, len(n.Status.Addresses)+1)
		for _, a := range n.Status.Addresses {
			addrs = append(addrs, a)
		}
		st["addresses"] = append(addrs, map[string]string{"$patch": "replace"})
	}
	if old.Status.DaemonEndpoints != n.Status.DaemonEndpoints {
		st["daemonEndpoints"] = n.Status.DaemonEndpoints
	}
	if !nodeInfoEqual(&old.Status.NodeInfo, &n.Status.NodeInfo) {
		st["nodeInfo"] = n.Status.NodeInfo
	}
	if !imagesEqual(old.Status.Images, n.Status.Images) {
		if len(n.Status.Images) == 0 {
			st["images"] = nil
		} else {
			st["images"] = n.Status.Images
		}
	}
	patch := map[string]any{"status": st}
	if labels := stringMapPatch(old.Labels, n.Labels); labels != nil {
		patch["metadata"] = map[string]any{"labels": labels}
	}
	return json.Marshal(patch)
}

// mapPatch is the merge of a map from old to n: changed and added keys with
// their value, dropped ones null; nil when equal.
func mapPatch(old, n v1.ResourceList) map[v1.ResourceName]any {
	var out map[v1.ResourceName]any
	set := func(k v1.ResourceName, v any) {
		if out == nil {
			out = map[v1.ResourceName]any{}
		}
		out[k] = v
	}
	for k, q := range n {
		if o, ok := old[k]; !ok || o.Cmp(q) != 0 {
			set(k, q)
		}
	}
	for k := range old {
		if _, ok := n[k]; !ok {
			set(k, nil)
		}
	}
	return out
}

// stringMapPatch is mapPatch for labels.
func stringMapPatch(old, n map[string]string) map[string]any {
	var out map[string]any
	set := func(k string, v any) {
		if out == nil {
			out = map[string]any{}
		}
		out[k] = v
	}
	for k, v := range n {
		if o, ok := old[k]; !ok || o != v {
			set(k, v)
		}
	}
	for k := range old {
		if _, ok := n[k]; !ok {
			set(k, nil)
		}
	}
	return out
}

func conditionEqual(a, b *v1.NodeCondition) bool {
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.LastHeartbeatTime.Equal(&b.LastHeartbeatTime) && a.LastTransitionTime.Equal(&b.LastTransitionTime)
}

// nilIfEmpty is s, or null for "": a merged condition would otherwise
// keep the reason or message the old one had.
func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
