package sim

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// mergeKeys are the strategic-merge keys of PodStatus's merged lists; every
// other field is replaced by the patch's value, or removed by null.
var mergeKeys = map[string]string{"conditions": "type", "podIPs": "ip", "hostIPs": "ip"}

// applyStatusPatch applies a strategic merge patch of a pod's status (what
// the status manager sends: fields replaced or nulled, conditions merged by
// type with $patch: delete, lists replaced with $patch: replace) and
// returns the new status and the patch's metadata.uid precondition. It
// saves the library a dependency on the full strategic-merge machinery.
func applyStatusPatch(old *v1.PodStatus, data []byte) (*v1.PodStatus, types.UID, error) {
	var patch struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
		Status map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(data, &patch); err != nil {
		return nil, "", fmt.Errorf("status patch: %w", err)
	}
	raw, err := json.Marshal(old)
	if err != nil {
		return nil, "", err
	}
	cur := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &cur); err != nil {
		return nil, "", err
	}
	for k, v := range patch.Status {
		if string(v) == "null" {
			delete(cur, k)
			continue
		}
		mk, merged := mergeKeys[k]
		if !merged {
			cur[k] = v
			continue
		}
		var items []map[string]any
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, "", fmt.Errorf("status patch: %s: %w", k, err)
		}
		var have []map[string]any
		if len(items) > 0 && items[0]["$patch"] == "replace" {
			items = items[1:]
		} else if cur[k] != nil {
			if err := json.Unmarshal(cur[k], &have); err != nil {
				return nil, "", err
			}
		}
	items:
		for _, it := range items {
			for i, h := range have {
				if h[mk] == it[mk] {
					if it["$patch"] == "delete" {
						have = append(have[:i], have[i+1:]...)
					} else {
						for f, fv := range it {
							h[f] = fv
						}
					}
					continue items
				}
			}
			if it["$patch"] != "delete" {
				have = append(have, it)
			}
		}
		if cur[k], err = json.Marshal(have); err != nil {
			return nil, "", err
		}
	}
	if raw, err = json.Marshal(cur); err != nil {
		return nil, "", err
	}
	var st v1.PodStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, "", fmt.Errorf("status patch: %w", err)
	}
	return &st, patch.Metadata.UID, nil
}
