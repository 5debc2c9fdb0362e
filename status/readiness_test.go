package status

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

func TestNeedToReconcilePodReadiness(t *testing.T) {
	const gate = v1.PodConditionType("example.com/gate")
	const missing = `corresponding condition of pod readiness gate "example.com/gate" does not exist.`
	pod := func(gated bool, conds ...v1.PodCondition) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: conds, ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true}}}}
		if gated {
			p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gate}}
		}
		return p
	}
	readyFalse := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: ReadinessGatesNotReady, Message: missing}
	readyTrue := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
	gateTrue := v1.PodCondition{Type: gate, Status: v1.ConditionTrue}
	gateFalse := v1.PodCondition{Type: gate, Status: v1.ConditionFalse}
	tests := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{name: "a pod without gates never", pod: pod(false, readyFalse)},
		{name: "a pod without a Ready condition yet", pod: pod(true)},
		{name: "Ready False while the gate's condition is missing stands", pod: pod(true, readyFalse)},
		{name: "a gate turned True makes Ready stale", pod: pod(true, readyFalse, gateTrue), want: true},
		{name: "Ready True with the gate True stands", pod: pod(true, readyTrue, gateTrue)},
		{name: "a gate turned False makes Ready stale", pod: pod(true, readyTrue, gateFalse), want: true},
		{name: "a changed message alone makes Ready stale", pod: pod(true, readyFalse, gateFalse), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, NeedToReconcilePodReadiness(tt.pod))
		})
	}
}
