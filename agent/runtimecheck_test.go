package agent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

// TestRuntimeCheckLeavesTheLastAnswerStanding: as the kubelet's runtime
// state, a failed Status call leaves the runtime's last answer standing;
// the runtime is down (no pod syncs) only before its first answer or once
// it has not answered ready for RuntimeDownAfter.
func TestRuntimeCheckLeavesTheLastAnswerStanding(t *testing.T) {
	type step struct {
		after   time.Duration // clock step before the check
		fail    bool          // Status fails
		ready   bool          // else the answer's RuntimeReady
		wantErr string        // "" for none
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a failed check soon after a ready answer leaves the runtime ready", []step{
			{0, false, true, ""}, {5 * time.Second, true, false, ""}, {20 * time.Second, true, false, ""}}},
		{"failed checks for RuntimeDownAfter make the runtime down", []step{
			{0, false, true, ""}, {20 * time.Second, true, false, ""}, {10 * time.Second, true, false, "runtime status"}}},
		{"a ready answer brings it back", []step{
			{0, false, true, ""}, {40 * time.Second, true, false, "runtime status"}, {5 * time.Second, false, true, ""}}},
		{"a failed first check is down", []step{{0, true, false, "runtime status"}}},
		{"a not-ready answer stands while checks fail", []step{
			{0, false, true, ""}, {5 * time.Second, false, false, "runtime not ready"}, {5 * time.Second, true, false, "runtime not ready"},
			{40 * time.Second, true, false, "runtime status"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
			rt, err := fake.New(fake.Config{})
			require.NoError(t, err)
			c := fastConfig(rt)
			c.Clock = clk
			c.RuntimeDownAfter = 30 * time.Second
			a, err := New(c)
			require.NoError(t, err)
			for i, s := range tc.steps {
				clk.Step(s.after)
				rate := 0.0
				if s.fail {
					rate = 1
				}
				require.NoError(t, rt.SetFailureRate("Status", rate))
				rt.SetCondition(runtime.RuntimeCondition{Type: runtime.RuntimeReady, Status: s.ready})
				a.checkRuntime(context.Background())
				got := *a.runtimeErr.Load()
				if s.wantErr == "" {
					assert.NoError(t, got, "step %d", i)
				} else if assert.Error(t, got, "step %d", i) {
					assert.Contains(t, got.Error(), s.wantErr, "step %d", i)
				}
			}
		})
	}
}

// TestANetworkNotReadyHoldsBackOnlyPodsOnThePodNetwork: as the kubelet,
// a runtime whose NetworkReady is false is no runtime error: every pod
// still syncs, a pod on the host's network starts, one on the pod network
// waits to start until the network is ready, and a running pod can be
// stopped meanwhile.
func TestANetworkNotReadyHoldsBackOnlyPodsOnThePodNetwork(t *testing.T) {
	rt, err := fake.New(fake.Config{})
	require.NoError(t, err)
	r := start(t, fastConfig(rt))
	running := newPod("running", v1.RestartPolicyAlways, "c")
	r.set(running)
	waitFor(t, "first pod running", func() bool { return r.phase(running.UID) == v1.PodRunning })

	rt.SetCondition(runtime.RuntimeCondition{Type: runtime.NetworkReady, Status: false, Reason: "NetworkPluginNotReady"})
	waitFor(t, "the agent saw the network down", func() bool { return r.a.networkError() != nil })
	require.NoError(t, r.a.runtimeError(), "a network not ready is no runtime error")
	host := newPod("host", v1.RestartPolicyAlways, "c")
	host.Spec.HostNetwork = true
	podNet := newPod("podnet", v1.RestartPolicyAlways, "c")
	r.set(running, host, podNet)
	waitFor(t, "the host-network pod running", func() bool { return r.phase(host.UID) == v1.PodRunning })
	time.Sleep(100 * time.Millisecond) // several syncs and relists
	require.Equal(t, v1.PodPending, r.phase(podNet.UID), "a pod on the pod network started without a network")

	r.set(host, podNet) // the first pod removed: it stops
	waitFor(t, "the removed pod stopped", func() bool {
		pods, err := rt.GetPods(context.Background(), false)
		if err != nil {
			return false
		}
		for _, p := range pods {
			if p.ID == running.UID {
				return false
			}
		}
		return true
	})

	rt.SetCondition(runtime.RuntimeCondition{Type: runtime.NetworkReady, Status: true})
	waitFor(t, "the pod-network pod running once the network is ready", func() bool { return r.phase(podNet.UID) == v1.PodRunning })
}
