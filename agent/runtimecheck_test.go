package agent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
