package status

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/status/statustest"
)

// An update sends what the apiserver would make of the pod with the patch
// it replaces: statustest's strategic merge (the apiserver's, for a status
// patch's fields; apimachinery's own would add kube-openapi and 20 modules
// to the library's go.mod) applies statusPatch's patch to api, and
// updatedStatus must come out the same.
func TestUpdatedStatusIsWhatThePatchMakes(t *testing.T) {
	t1 := metav1.NewTime(metav1.Now().Rfc3339Copy().Time)
	running := v1.PodStatus{
		Phase: v1.PodRunning, HostIP: "10.0.0.1", PodIP: "10.1.0.5", QOSClass: v1.PodQOSBestEffort, StartTime: &t1,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, LastTransitionTime: t1},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: t1},
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: t1},
			{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: t1},
		},
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", Image: "img", Ready: true,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: t1}}}},
	}
	withOthers := func(s v1.PodStatus) v1.PodStatus {
		s.NominatedNodeName = "n2"
		s.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "claim"}}
		s.Conditions = append([]v1.PodCondition{{Type: "example.com/gate", Status: v1.ConditionTrue, LastTransitionTime: t1}}, s.Conditions...)
		return s
	}
	notReady := running
	notReady.Conditions = []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [c]", LastTransitionTime: t1},
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: t1},
	}
	dualStack := running
	dualStack.PodIPs = []v1.PodIP{{IP: "10.1.0.5"}, {IP: "fd00::5"}}
	derivedIPs := running
	derivedIPs.PodIPs = []v1.PodIP{{IP: "10.1.0.5"}}
	derivedIPs.HostIPs = []v1.HostIP{{IP: "10.0.0.1"}}
	withMessage := running
	withMessage.Message = "m"
	for _, tc := range []struct {
		name        string
		api, status v1.PodStatus
	}{
		{"a new pod to Running", v1.PodStatus{Phase: v1.PodPending, QOSClass: v1.PodQOSBestEffort}, running},
		{"others' fields and conditions stay", withOthers(v1.PodStatus{Phase: v1.PodPending}), withOthers(running)},
		{"a condition that drops its reason, one the agent no longer sets", notReady, running},
		{"a condition the agent adds goes last", running, notReady},
		{"a dual-stack pod's IPs", running, dualStack},
		{"the IP lists the apiserver derived from single IPs stay", derivedIPs, withMessage},
		{"container statuses go", running, v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "gone"}},
		{"observedGeneration", v1.PodStatus{ObservedGeneration: 1}, v1.PodStatus{ObservedGeneration: 2, Phase: v1.PodRunning}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patch, changed, err := statusPatch("uid-1", &tc.api, &tc.status)
			require.NoError(t, err)
			require.True(t, changed)
			f := statustest.New(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}, Status: tc.api})
			want, err := f.Pods("ns").Patch(t.Context(), "p", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
			require.NoError(t, err)
			got := updatedStatus(&tc.api, &tc.status)
			// Both through JSON, as the apiserver stores them (nil and
			// empty lists alike).
			gotJSON, err := json.Marshal(got)
			require.NoError(t, err)
			wantJSON, err := json.Marshal(want.Status)
			require.NoError(t, err)
			assert.JSONEq(t, string(wantJSON), string(gotJSON), "patch %s", patch)
		})
	}
}

// The update's pod is the apiserver's: the agent's own annotations on its
// copy and the managed fields stay out, and api is not changed.
func TestUpdateBodyLeavesOutTheAgentsAnnotations(t *testing.T) {
	api := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7",
		Annotations: map[string]string{
			podutil.ConfigSourceAnnotationKey:    podutil.ApiserverSource,
			podutil.ConfigFirstSeenAnnotationKey: "2026-11-27T10:00:00Z",
			"example.com/a":                      "b",
		},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	body := updateBody(api, v1.PodStatus{Phase: v1.PodRunning})
	assert.Equal(t, map[string]string{"example.com/a": "b"}, body.Annotations)
	assert.Nil(t, body.ManagedFields)
	assert.Equal(t, "7", body.ResourceVersion)
	assert.Equal(t, v1.PodRunning, body.Status.Phase)
	assert.Len(t, api.Annotations, 3, "the agent's copy is unchanged")
	assert.Len(t, api.ManagedFields, 1)

	plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"example.com/a": "b"}}}
	assert.Equal(t, plain.Annotations, updateBody(plain, v1.PodStatus{}).Annotations)
}
