package agent

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime/fake"
)

// A controller sets a readiness gate's condition in the apiserver; the
// agent learns of it as a status-only change (RECONCILE) and must sync the
// pod for Ready to follow, without waiting for a periodic sync.
func TestReadinessGatesFollowTheirConditions(t *testing.T) {
	const gate = v1.PodConditionType("example.com/gate")
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.SyncFrequency = time.Hour // no periodic sync to hide a missing one
	r := start(t, c)

	pod := newPod("gated", v1.RestartPolicyAlways, "c")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gate}}
	r.set(pod)
	ready := func() *v1.PodCondition {
		if p := r.pod(pod.UID); p != nil {
			for i, cond := range p.Status.Conditions {
				if cond.Type == v1.PodReady {
					return &p.Status.Conditions[i]
				}
			}
		}
		return nil
	}
	waitFor(t, "Ready False for want of the gate", func() bool {
		c := ready()
		return r.phase(pod.UID) == v1.PodRunning && c != nil && c.Status == v1.ConditionFalse &&
			c.Message == `corresponding condition of pod readiness gate "example.com/gate" does not exist.`
	})

	// The apiserver's pod: the agent's status with the gate's condition.
	withGate := func(s v1.ConditionStatus) *v1.Pod {
		p := pod.DeepCopy()
		p.Status = *r.pod(pod.UID).Status.DeepCopy()
		conds := p.Status.Conditions[:0]
		for _, c := range p.Status.Conditions {
			if c.Type != gate {
				conds = append(conds, c)
			}
		}
		p.Status.Conditions = append(conds, v1.PodCondition{Type: gate, Status: s})
		return p
	}
	r.set(withGate(v1.ConditionTrue))
	waitFor(t, "Ready True once the gate is", func() bool { c := ready(); return c != nil && c.Status == v1.ConditionTrue })

	r.set(withGate(v1.ConditionFalse))
	waitFor(t, "Ready False once the gate is", func() bool {
		c := ready()
		return c != nil && c.Status == v1.ConditionFalse && c.Message == `the status of pod readiness gate "example.com/gate" is not "True", but False`
	})
}
