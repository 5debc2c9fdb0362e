package nodetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// VerbPatch is the verb of a recorded Patch; its Action carries the patch
// in Patch.
const VerbPatch = "patch"

// PatchingNodeClient is the Fake's Nodes with Patch too: client-go's
// CoreV1().Nodes() method set, with which the node controller sends its
// status as a strategic merge patch, as the kubelet does. NodeClient,
// without Patch, is a client that can only update.
type PatchingNodeClient struct{ *NodeClient }

// PatchingNodes returns the Fake's Nodes client with Patch.
func (f *Fake) PatchingNodes() *PatchingNodeClient {
	return &PatchingNodeClient{NodeClient: f.Nodes()}
}

// Patch applies a strategic merge patch to the Node (maps merged key by
// key, null deleting; the lists the API merges by key, conditions,
// addresses, taints and owner references, merged by it with the "$patch"
// directives delete and replace; other lists replaced); with subresource
// "status", only its status and metadata are taken (the apiserver's node
// status strategy keeps the spec). As the apiserver's, a patch that sets
// metadata.resourceVersion is a precondition (Conflict when stale), one
// that does not always applies. Other patch types are refused.
func (c *PatchingNodeClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions, subresources ...string) (*v1.Node, error) {
	sub := ""
	if len(subresources) > 0 {
		sub = subresources[0]
	}
	a := Action{Verb: VerbPatch, Resource: "nodes", Subresource: sub, Name: name, Patch: append([]byte(nil), data...)}
	o, err := c.f.do(ctx, a, func() (any, error) {
		if pt != types.StrategicMergePatchType {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("nodetest: patch type %s is not supported", pt))
		}
		if sub != "" && sub != "status" {
			return nil, apierrors.NewNotFound(groupResources["nodes"], name+"/"+sub)
		}
		old, err := c.f.getLocked("nodes", name)
		if err != nil {
			return nil, err
		}
		orig, err := json.Marshal(old)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		var origMap, patchMap map[string]any
		if err := json.Unmarshal(orig, &origMap); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if err := json.Unmarshal(data, &patchMap); err != nil {
			return nil, apierrors.NewBadRequest("nodetest: invalid patch: " + err.Error())
		}
		patched, err := json.Marshal(mergeMap(origMap, patchMap, ""))
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		n := &v1.Node{}
		if err := json.Unmarshal(patched, n); err != nil {
			return nil, apierrors.NewBadRequest("nodetest: patched node: " + err.Error())
		}
		if n.Name != name {
			return nil, apierrors.NewBadRequest("nodetest: a patch must not change the name")
		}
		if sub == "" { // a patch of the Node leaves its status, as Update
			return c.f.updateLocked("nodes", n, false)
		}
		return c.f.updateLocked("nodes", n, true)
	})
	if err != nil {
		return nil, err
	}
	return o.(*v1.Node), nil
}

// mergeKeys are the patchMergeKeys of the Node's merged lists, by path.
var mergeKeys = map[string]string{
	"status.conditions":        "type",
	"status.addresses":         "type",
	"spec.taints":              "key",
	"metadata.ownerReferences": "uid",
}

// mergeMap applies patch to orig (modified) at path as a strategic merge.
func mergeMap(orig, patch map[string]any, path string) map[string]any {
	if orig == nil {
		orig = map[string]any{}
	}
	for k, pv := range patch {
		if strings.HasPrefix(k, "$") {
			continue // $setElementOrder and other directives: order aside
		}
		p := k
		if path != "" {
			p = path + "." + k
		}
		switch pv := pv.(type) {
		case nil:
			delete(orig, k)
		case map[string]any:
			om, _ := orig[k].(map[string]any)
			orig[k] = mergeMap(om, pv, p)
		case []any:
			if key, ok := mergeKeys[p]; ok {
				ol, _ := orig[k].([]any)
				orig[k] = mergeList(ol, pv, key, p)
			} else {
				orig[k] = pv
			}
		default:
			orig[k] = pv
		}
	}
	return orig
}

// mergeList merges patch into orig by key: {"$patch": "replace"} makes the
// patch's items the list; an item with "$patch": "delete" removes its
// key's item; others are merged into their key's item, or appended.
func mergeList(orig, patch []any, key, path string) []any {
	for _, it := range patch {
		if m, ok := it.(map[string]any); ok && m["$patch"] == "replace" {
			out := []any{}
			for _, it := range patch {
				if m, ok := it.(map[string]any); !ok || m["$patch"] != "replace" {
					out = append(out, it)
				}
			}
			return out
		}
	}
	for _, it := range patch {
		pm, ok := it.(map[string]any)
		if !ok {
			orig = append(orig, it)
			continue
		}
		i := slices.IndexFunc(orig, func(o any) bool {
			om, ok := o.(map[string]any)
			return ok && om[key] == pm[key]
		})
		switch {
		case pm["$patch"] == "delete":
			if i >= 0 {
				orig = slices.Delete(orig, i, i+1)
			}
		case i >= 0:
			orig[i] = mergeMap(orig[i].(map[string]any), pm, path)
		default:
			orig = append(orig, mergeMap(nil, pm, path))
		}
	}
	return orig
}
