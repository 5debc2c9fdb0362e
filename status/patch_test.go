package status

import (
	"encoding/json"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// statusPatch is the patch the manager sends to turn api into status
// (statusChanges, marshalPatch); changed is false when there is nothing
// to send.
func statusPatch(uid types.UID, api, status *v1.PodStatus) (patch []byte, changed bool, err error) {
	fields := statusChanges(api, status)
	if len(fields) == 0 {
		return nil, false, nil
	}
	patch, err = marshalPatch(uid, fields)
	return patch, err == nil, err
}

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

// What the Manager keeps of a patch's answer is what the next patch or
// update builds on (an update of pods/status takes the labels and
// annotations from its body), not one more copy of the whole pod.
func TestAPIPodKeepsWhatPatchesBuildOnOnly(t *testing.T) {
	now := metav1.Now()
	full := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", DeletionTimestamp: &now,
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec:   v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
	}
	got := apiPodOf(full)
	want := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", DeletionTimestamp: &now,
			Labels: full.Labels, Annotations: full.Annotations},
		Status: full.Status,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("apiPodOf kept %+v, want %+v", got, want)
	}
	got.Status.Conditions[0].Status = v1.ConditionFalse
	if full.Status.Conditions[0].Status != v1.ConditionTrue {
		t.Error("apiPodOf shares the status with the pod it was given")
	}
}
