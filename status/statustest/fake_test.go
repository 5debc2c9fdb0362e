package statustest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/status/statustest"
)

func pod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid1"},
		Status: v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{
			{Type: "A", Status: v1.ConditionTrue}, {Type: "B", Status: v1.ConditionTrue},
		}, PodIPs: []v1.PodIP{{IP: "10.0.0.1"}}},
	}
}

func TestPatchAppliesStatusPatches(t *testing.T) {
	ctx := context.Background()
	f := statustest.New(pod())
	c := f.Pods("ns")
	patch := `{"metadata":{"uid":"uid1"},"status":{"phase":"Running",
		"conditions":[{"type":"B","$patch":"delete"},{"type":"C","status":"False"},{"type":"A","status":"False"}],
		"podIPs":[{"$patch":"replace"},{"ip":"10.0.0.2"}]}}`
	got, err := c.Patch(ctx, "p", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	assert.Equal(t, v1.PodRunning, got.Status.Phase)
	assert.Equal(t, []v1.PodCondition{{Type: "A", Status: v1.ConditionFalse}, {Type: "C", Status: v1.ConditionFalse}}, got.Status.Conditions)
	assert.Equal(t, []v1.PodIP{{IP: "10.0.0.2"}}, got.Status.PodIPs)
	stored, _ := f.Pod("ns", "p")
	assert.Equal(t, got, stored)
}

func TestPatchChecksTheUIDPrecondition(t *testing.T) {
	f := statustest.New(pod())
	_, err := f.Pods("ns").Patch(context.Background(), "p", types.StrategicMergePatchType,
		[]byte(`{"metadata":{"uid":"other"},"status":{"phase":"Running"}}`), metav1.PatchOptions{}, "status")
	assert.True(t, apierrors.IsConflict(err))
	stored, _ := f.Pod("ns", "p")
	assert.Equal(t, v1.PodPending, stored.Status.Phase, "nothing changed")
}

func TestPatchRejectsWhatItCannotApply(t *testing.T) {
	c := statustest.New(pod()).Pods("ns")
	_, err := c.Patch(context.Background(), "p", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
	assert.True(t, apierrors.IsBadRequest(err), "JSON merge patch")
	_, err = c.Patch(context.Background(), "p", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{})
	assert.True(t, apierrors.IsBadRequest(err), "no status subresource")
}

func TestCreateAndDelete(t *testing.T) {
	ctx := context.Background()
	f := statustest.New()
	c := f.Pods("ns")
	p := pod()
	p.UID = ""
	created, err := c.Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, created.UID)
	assert.Equal(t, v1.PodStatus{Phase: v1.PodPending}, created.Status)
	_, err = c.Create(ctx, p, metav1.CreateOptions{})
	assert.True(t, apierrors.IsAlreadyExists(err))

	zero := int64(0)
	err = c.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions("other")})
	assert.True(t, apierrors.IsConflict(err), "UID precondition")
	err = c.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions(string(created.UID))})
	require.NoError(t, err)
	_, err = c.Get(ctx, "p", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	assert.Equal(t, []string{"create", "create", "delete", "delete", "get"}, verbs(f.Actions()))
}

func TestInjectedErrorsComeFirstAndInOrder(t *testing.T) {
	f := statustest.New(pod())
	f.InjectError(statustest.VerbGet, apierrors.NewConflict(v1.Resource("pods"), "p", nil))
	f.InjectError(statustest.VerbGet, apierrors.NewNotFound(v1.Resource("pods"), "p"))
	c := f.Pods("ns")
	_, err := c.Get(context.Background(), "p", metav1.GetOptions{})
	assert.True(t, apierrors.IsConflict(err))
	_, err = c.Get(context.Background(), "p", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	_, err = c.Get(context.Background(), "p", metav1.GetOptions{})
	assert.NoError(t, err)
	assert.Equal(t, 3, f.Count(statustest.VerbGet))
}

func verbs(as []statustest.Action) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Verb)
	}
	return out
}

// UpdateStatus applies on the stored resourceVersion only, and takes the
// status, labels and annotations, not the spec.
func TestUpdateStatusChecksTheResourceVersion(t *testing.T) {
	ctx := context.Background()
	f := statustest.New(pod())
	c := f.Pods("ns")
	cur, _ := f.Pod("ns", "p")

	stale := cur.DeepCopy()
	stale.ResourceVersion = "0"
	_, err := c.UpdateStatus(ctx, stale, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "stale resourceVersion: %v", err)
	none := cur.DeepCopy()
	none.ResourceVersion = ""
	_, err = c.UpdateStatus(ctx, none, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsBadRequest(err), "no resourceVersion: %v", err)

	next := cur.DeepCopy()
	next.Status = v1.PodStatus{Phase: v1.PodRunning}
	next.Annotations = map[string]string{"a": "b"}
	next.Spec.NodeName = "elsewhere"
	got, err := c.UpdateStatus(ctx, next, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, v1.PodStatus{Phase: v1.PodRunning}, got.Status)
	assert.Equal(t, map[string]string{"a": "b"}, got.Annotations)
	assert.Empty(t, got.Spec.NodeName, "the spec is not the status subresource's")
	assert.NotEqual(t, cur.ResourceVersion, got.ResourceVersion)
	assert.Equal(t, []string{statustest.VerbUpdate, statustest.VerbUpdate, statustest.VerbUpdate}, verbs(f.Actions()))
	_, err = c.UpdateStatus(ctx, next, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "the old resourceVersion again: %v", err)
}
