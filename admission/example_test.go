package admission_test

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/admission"
)

// A custom check after the built-in ones: only images of one registry run.
func ExampleAdmit() {
	registryOnly := admission.PodAdmitHandlerFunc(func(attrs *admission.PodAdmitAttributes) admission.PodAdmitResult {
		for _, c := range attrs.Pod.Spec.Containers {
			if !strings.HasPrefix(c.Image, "registry.example/") {
				return admission.PodAdmitResult{Reason: "UntrustedImage", Message: fmt.Sprintf("image %q is not from registry.example", c.Image)}
			}
		}
		return admission.PodAdmitResult{Admit: true}
	})
	handlers := []admission.PodAdmitHandler{admission.MaxPods(110), admission.DenyPrivileged(), registryOnly}

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "docker.io/nginx:1.27"}}}}
	r := admission.Admit(handlers, &admission.PodAdmitAttributes{Pod: pod})
	fmt.Println(r.Admit, r.Reason)
	// Output: false UntrustedImage
}
