package provider_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/provider/providertest"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/status/statustest"
)

const src = podutil.ApiserverSource

// runAgent runs an agent on a provider runtime over h until the test ends.
// The relist is an hour: whatever arrives came through the event stream.
func runAgent(t *testing.T, h provider.PodLifecycleHandler, api *statustest.Fake) *agent.Agent {
	t.Helper()
	rt, err := provider.New(provider.Config{Provider: h, PollPeriod: 20 * time.Millisecond, DeleteCheckPeriod: 10 * time.Millisecond})
	require.NoError(t, err)
	a, err := agent.New(agent.Config{
		NodeName:           "vk",
		Runtime:            rt,
		Sources:            []string{src},
		StatusClient:       func(ns string) status.PodClient { return api.Pods(ns) },
		RelistPeriod:       time.Hour,
		RuntimeCheckPeriod: 20 * time.Millisecond,
		SyncErrorBackOff:   20 * time.Millisecond,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return a
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	require.Eventually(t, cond, 30*time.Second, 5*time.Millisecond, what)
	t.Logf("%s after %v", what, time.Since(start))
}

func stored(api *statustest.Fake, pod *v1.Pod) *v1.PodStatus {
	p, ok := api.Pod(pod.Namespace, pod.Name)
	if !ok {
		return nil
	}
	return &p.Status
}

// kubeletOwned drops from st what the kubelet always sets, to compare the
// rest with the provider's status.
func kubeletOwned(st v1.PodStatus) v1.PodStatus {
	st = *st.DeepCopy()
	st.QOSClass, st.StartTime, st.ObservedGeneration = "", nil, 0
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime, st.Conditions[i].ObservedGeneration = metav1.Time{}, 0
	}
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		if r := cs.State.Running; r != nil {
			r.StartedAt = metav1.Time{}
		}
		if r := cs.State.Terminated; r != nil {
			r.StartedAt, r.FinishedAt = metav1.Time{}, metav1.Time{}
		}
	}
	return st
}

func TestAgentOnAProvider(t *testing.T) {
	for _, tc := range []struct {
		name   string
		handle func(*providertest.Provider) provider.PodLifecycleHandler
	}{
		{"with NotifyPods", func(p *providertest.Provider) provider.PodLifecycleHandler {
			return &providertest.Notifier{Provider: p}
		}},
		{"polled", func(p *providertest.Provider) provider.PodLifecycleHandler { return p }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("web")
			pod.Spec.NodeName = "vk"
			api := statustest.New(pod)
			p := providertest.New(nil)
			a := runAgent(t, tc.handle(p), api)
			a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}

			eventually(t, "the pod Running in the apiserver", func() bool {
				st := stored(api, pod)
				return st != nil && st.Phase == v1.PodRunning
			})
			want := p.Pod("default", "web").Status
			got := *stored(api, pod)
			assert.Equal(t, kubeletOwned(want), kubeletOwned(got), "the provider's status, unchanged")
			assert.Equal(t, v1.PodQOSBestEffort, got.QOSClass, "the kubelet's QoS class")
			require.NotNil(t, got.StartTime)
			for _, c := range got.Conditions {
				assert.False(t, c.LastTransitionTime.IsZero(), "condition %s has a transition time", c.Type)
			}

			// A change the backend makes reaches the apiserver.
			p.SetPodStatus("default", "web", func(st *v1.PodStatus) {
				st.Conditions[1].Status = v1.ConditionFalse
				st.ContainerStatuses[0].Ready = false
				st.Message = "draining"
			})
			eventually(t, "the provider's change in the apiserver", func() bool {
				st := stored(api, pod)
				return st.Message == "draining"
			})
			assert.Equal(t, kubeletOwned(p.Pod("default", "web").Status), kubeletOwned(*stored(api, pod)))

			// Graceful deletion: DeletePod with the grace period, then the
			// pod goes from the apiserver.
			p.HoldDeletes(true)
			deleted := pod.DeepCopy()
			deleted.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			deleted.DeletionGracePeriodSeconds = ptr.To[int64](30)
			inAPI, _ := api.Pod("default", "web")
			inAPI.DeletionTimestamp, inAPI.DeletionGracePeriodSeconds = deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds
			api.Add(inAPI) // as the apiserver marks it
			a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{deleted}}
			eventually(t, "DeletePod", func() bool { return p.Held("default", "web") })
			time.Sleep(50 * time.Millisecond)
			_, still := api.Pod("default", "web")
			assert.True(t, still, "not deleted from the apiserver while the provider runs it")
			require.NoError(t, p.FinishDelete("default", "web"))
			eventually(t, "the pod deleted from the apiserver", func() bool {
				_, ok := api.Pod("default", "web")
				return !ok
			})
			assert.Equal(t, 1, p.Calls("CreatePod"))
			assert.Zero(t, p.Calls("UpdatePod"))
		})
	}
}

func TestAgentReportsProviderErrors(t *testing.T) {
	pod := testPod("web")
	api := statustest.New(pod)
	p := providertest.NewNotifier(nil)
	p.SetError("CreatePod", assert.AnError)
	rec := &recorder{}
	rt, err := provider.New(provider.Config{Provider: p, Recorder: rec})
	require.NoError(t, err)
	a, err := agent.New(agent.Config{NodeName: "vk", Runtime: rt, Sources: []string{src},
		StatusClient:     func(ns string) status.PodClient { return api.Pods(ns) },
		SyncErrorBackOff: 10 * time.Millisecond, CrashLoopBackOffInitial: 20 * time.Millisecond, CrashLoopBackOffMax: 40 * time.Millisecond,
		RuntimeCheckPeriod: 20 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}

	eventually(t, "ProviderFailed in the apiserver", func() bool {
		st := stored(api, pod)
		return st.Reason == provider.ReasonProviderFailed && st.Phase == v1.PodPending
	})
	eventually(t, "retries", func() bool { return p.Calls("CreatePod") >= 3 })
	p.SetError("CreatePod", nil)
	eventually(t, "Running once the provider recovers", func() bool {
		return stored(api, pod).Phase == v1.PodRunning
	})
	assert.Contains(t, rec.list(), "Warning "+provider.ReasonCreateFailed)
	assert.Contains(t, rec.list(), "Normal "+provider.ReasonCreateSuccess)
}

// A pod an instant provider runs goes to Running in the apiserver in one
// status write and no read (the pod as the apiserver delivered it is the
// base of the patch): its status is read right after CreatePod, not written
// Pending first, and its notification reaches the next sync at once.
func TestOneStatusWriteToRunning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		handle func(*providertest.Provider) provider.PodLifecycleHandler
	}{
		{"with NotifyPods", func(p *providertest.Provider) provider.PodLifecycleHandler {
			return &providertest.Notifier{Provider: p}
		}},
		{"polled", func(p *providertest.Provider) provider.PodLifecycleHandler { return p }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("web")
			api := statustest.New(pod)
			pod.ResourceVersion = "1" // as the apiserver delivers it
			a := runAgent(t, tc.handle(providertest.New(nil)), api)
			a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
			eventually(t, "the pod Running in the apiserver", func() bool {
				st := stored(api, pod)
				return st != nil && st.Phase == v1.PodRunning
			})
			var verbs []string
			for _, act := range api.Actions() {
				verbs = append(verbs, act.Verb)
			}
			require.Equal(t, []string{statustest.VerbPatch}, verbs[:1])
			assert.Contains(t, string(api.Actions()[0].Patch), `"phase":"Running"`, "the first write is Running")
		})
	}
}
