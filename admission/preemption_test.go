package admission_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/podutil"
)

// named is a pod called name requesting kv (requests = limits if
// guaranteed).
func named(name string, guaranteed bool, kv ...string) *v1.Pod {
	p := reqPod(kv...)
	p.Name = name
	if guaranteed {
		p.Spec.Containers[0].Resources.Limits = rl(kv...)
	}
	return p
}

func critical(p *v1.Pod) *v1.Pod {
	p.Spec.Priority = ptr.To(podutil.SystemCriticalPriority)
	return p
}

func static(p *v1.Pod) *v1.Pod {
	p.Annotations = map[string]string{podutil.ConfigSourceAnnotationKey: podutil.FileSource}
	return p
}

// TestCriticalPodPreemption: the kubelet's CriticalPodAdmissionHandler.
func TestCriticalPodPreemption(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: v1.NodeStatus{Allocatable: rl("cpu", "1", "memory", "1000Mi", "pods", "5")}}
	bestEffort := named("besteffort", false)
	burstable := named("burstable", false, "cpu", "300m")
	guaranteed := named("guaranteed", true, "cpu", "400m", "memory", "100Mi")
	otherCritical := critical(named("other-critical", false, "cpu", "200m"))
	others := []*v1.Pod{bestEffort, burstable, guaranteed, otherCritical} // 900m cpu used

	cases := []struct {
		name    string
		pod     *v1.Pod
		others  []*v1.Pod
		victims []string
		reason  string // "" admits
	}{
		{"a pod that fits preempts nothing", critical(named("c", false, "cpu", "100m")), others, nil, ""},
		{"a burstable pod is enough for what is missing", critical(named("c", false, "cpu", "350m")), others,
			[]string{"burstable"}, ""},
		{"the guaranteed pods needed if every lower one went come first", critical(named("c", false, "cpu", "500m")), others,
			[]string{"guaranteed"}, ""},
		{"a static pod is critical", static(named("c", false, "cpu", "350m")), others, []string{"burstable"}, ""},
		{"the pods count is freed with one BestEffort pod (the last of equals, as the kubelet)", critical(named("c", false)),
			[]*v1.Pod{bestEffort, burstable, guaranteed, otherCritical, named("be2", false)}, []string{"be2"}, ""},
		{"more than one pod when one is not enough", critical(named("c", false, "cpu", "800m")), others,
			[]string{"burstable", "guaranteed"}, ""},
		{"a pod that is not critical is refused", named("c", false, "cpu", "350m"), others, nil, admission.ReasonOutOfPrefix + "cpu"},
		{"critical pods are not preempted", critical(named("c", false, "cpu", "1")), []*v1.Pod{otherCritical}, nil,
			admission.ReasonUnexpectedAdmissionError},
		{"not enough to free even with every pod preempted", critical(named("c", false, "cpu", "2")), others, nil,
			admission.ReasonUnexpectedAdmissionError},
		{"another failure refuses a critical pod with it", func() *v1.Pod {
			p := critical(named("c", false, "cpu", "350m"))
			p.Spec.NodeName = "elsewhere"
			return p
		}(), others, nil, admission.ReasonNodeName},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			calls := 0
			h := admission.GeneralPredicatesWithPreemption(func() *v1.Node { return node }, nil,
				admission.PreempterFunc(func(victims []*v1.Pod, message string) {
					calls++
					assert.Equal(t, admission.PreemptionMessage, message)
					for _, v := range victims {
						got = append(got, v.Name)
					}
				}))
			r := h.Admit(&admission.PodAdmitAttributes{Pod: tc.pod, OtherPods: tc.others})
			if tc.reason == "" {
				assert.True(t, r.Admit, "refused: %s: %s", r.Reason, r.Message)
			} else {
				assert.False(t, r.Admit)
				assert.Equal(t, tc.reason, r.Reason, r.Message)
			}
			assert.ElementsMatch(t, tc.victims, got)
			if len(tc.victims) == 0 {
				assert.Zero(t, calls, "Preempt called with no victims needed")
			}
		})
	}
}
