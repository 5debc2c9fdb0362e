package main

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podconfig/podconfigtest"
)

// workloadPods returns n podconfig benchmark pods
// (podconfigtest.WorkloadPod); pod changed (if in range) has
// image, the others registry.example.com/web:1.0.
func workloadPods(n, changed int, image string) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		img := "registry.example.com/web:1.0"
		if i == changed {
			img = image
		}
		pods[i] = podconfigtest.WorkloadPod(i, img)
	}
	return pods
}

// workerPods returns the pod workers' input: n pods with a grace period.
func workerPods(n int) []*v1.Pod {
	thirty := int64(30)
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprintf("uid-%d", i)), Namespace: "ns", Name: fmt.Sprintf("pod-%d", i)},
			Spec:       v1.PodSpec{TerminationGracePeriodSeconds: &thirty},
		}
	}
	return pods
}
