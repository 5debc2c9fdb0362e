package status_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/status/statustest"
)

func readyOf(p *v1.Pod) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status
		}
	}
	return ""
}

// The node lifecycle controller sets Ready False on the pods of a node it
// found unreachable; once the agent sees that update, it sends its own
// status again (the kubelet's periodic reconcile does), and an update no
// newer than its own patch's answer, or one agreeing with it, sends
// nothing.
func TestReadyOverwrittenByAnotherWriterIsSentAgain(t *testing.T) {
	ctx := context.Background()
	pod := testPod("p", "uid1")
	f := statustest.New(pod)
	m, _ := newManager(t, f, nil)
	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(ctx)
	api, _ := f.Pod("ns", "p")
	require.Equal(t, v1.ConditionTrue, readyOf(api))
	patches := f.Count("patch")

	m.ReconcileAPIPod(api) // the echo of its own patch
	m.Sync(ctx)
	assert.Equal(t, patches, f.Count("patch"), "its own patch's echo sent again")

	// The controller's write (an update of the status, as MarkPodsNotReady).
	marked := api.DeepCopy()
	for i := range marked.Status.Conditions {
		if marked.Status.Conditions[i].Type == v1.PodReady {
			marked.Status.Conditions[i].Status = v1.ConditionFalse
		}
	}
	f.Add(marked)
	marked, _ = f.Pod("ns", "p")
	require.Equal(t, v1.ConditionFalse, readyOf(marked))

	stale := api.DeepCopy()
	stale.Status.Conditions = nil
	m.ReconcileAPIPod(stale) // older than its patch's answer
	m.Sync(ctx)
	assert.Equal(t, patches, f.Count("patch"), "an update older than its patch's answer sent a patch")

	m.ReconcileAPIPod(marked)
	m.Sync(ctx)
	got, _ := f.Pod("ns", "p")
	assert.Equal(t, v1.ConditionTrue, readyOf(got), "Ready not put back")
	assert.Equal(t, patches+1, f.Count("patch"))
}

// Pods the Manager sends nothing for are left alone.
func TestReconcileAPIPodIgnoresUnknownAndTerminalPods(t *testing.T) {
	ctx := context.Background()
	pod := testPod("p", "uid1")
	f := statustest.New(pod)
	m, _ := newManager(t, f, nil)
	m.ReconcileAPIPod(pod) // unknown: no status of the agent's to send
	m.Sync(ctx)
	assert.Empty(t, verbs(f), "a pod the agent has no status for")
	st := runningStatus("cri://a")
	st.Phase = v1.PodSucceeded
	m.SetPodStatus(pod, st)
	m.Sync(ctx)
	f.ClearActions()
	other := pod.DeepCopy()
	other.UID = types.UID("uid1") // the same pod, as another writer left it
	other.Status.Phase = v1.PodRunning
	other.ResourceVersion = "999999"
	m.ReconcileAPIPod(other)
	m.Sync(ctx)
	assert.Empty(t, verbs(f), "a pod the agent finished: neither read nor written again")
}
