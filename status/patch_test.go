package status

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A condition that no longer has a reason or message sends them as null:
// a strategic merge keeps fields the patch leaves out, so the apiserver
// would otherwise keep "ContainersNotReady" on a Ready=True condition.
func TestConditionThatDropsItsReasonNullsIt(t *testing.T) {
	api := &v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse,
		Reason: "ContainersNotReady", Message: "containers with unready status: [app]"}}}
	now := &v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	patch, changed, err := statusPatch("uid-1", api, now)
	if err != nil || !changed {
		t.Fatalf("statusPatch: changed %v, %v", changed, err)
	}
	var got struct {
		Status struct {
			Conditions []map[string]any `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 {
		t.Fatalf("conditions in patch: %s", patch)
	}
	c := got.Status.Conditions[0]
	for _, f := range []string{"reason", "message"} {
		if v, ok := c[f]; !ok || v != nil {
			t.Errorf("%s: %v (present %v), want null in %s", f, v, ok, patch)
		}
	}
	if c["status"] != "True" || c["type"] != "Ready" {
		t.Errorf("condition %v", c)
	}
}
