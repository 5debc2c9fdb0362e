package admission_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/admission"
)

func TestAdmit(t *testing.T) {
	plain := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	hostNet := &v1.Pod{Spec: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{Name: "c"}}}}
	privInit := &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "init",
		SecurityContext: &v1.SecurityContext{Privileged: ptr.To(true)}}}, Containers: []v1.Container{{Name: "c"}}}}
	refuseAll := admission.PodAdmitHandlerFunc(func(*admission.PodAdmitAttributes) admission.PodAdmitResult {
		return admission.PodAdmitResult{Reason: "Custom", Message: "no"}
	})
	for _, tc := range []struct {
		name     string
		handlers []admission.PodAdmitHandler
		pod      *v1.Pod
		others   int
		reason   string // "" admits
	}{
		{"no handler admits", nil, plain, 5, ""},
		{"pod under MaxPods admitted", []admission.PodAdmitHandler{admission.MaxPods(2)}, plain, 1, ""},
		{"pod at MaxPods refused", []admission.PodAdmitHandler{admission.MaxPods(2)}, plain, 2, admission.ReasonOutOfPods},
		{"host network refused", []admission.PodAdmitHandler{admission.DenyHostNamespaces()}, hostNet, 0, admission.ReasonHostNamespacesNotAllowed},
		{"plain pod passes host namespace check", []admission.PodAdmitHandler{admission.DenyHostNamespaces()}, plain, 0, ""},
		{"privileged init container refused", []admission.PodAdmitHandler{admission.DenyPrivileged()}, privInit, 0, admission.ReasonPrivilegedNotAllowed},
		{"first refusal wins", []admission.PodAdmitHandler{admission.MaxPods(1), refuseAll}, plain, 1, admission.ReasonOutOfPods},
		{"later handler refuses what earlier admit", []admission.PodAdmitHandler{admission.MaxPods(5), nil, refuseAll}, plain, 1, "Custom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			others := make([]*v1.Pod, tc.others)
			r := admission.Admit(tc.handlers, &admission.PodAdmitAttributes{Pod: tc.pod, OtherPods: others})
			assert.Equal(t, tc.reason == "", r.Admit)
			assert.Equal(t, tc.reason, r.Reason)
			if !r.Admit {
				assert.NotEmpty(t, r.Message)
			}
		})
	}
}
