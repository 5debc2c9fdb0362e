package status_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/podworkers/podworkerstest"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/status/statustest"
)

func ExampleNewManager() {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "nginx"}}},
	}
	api := statustest.New(pod) // the apiserver; client-go's clientset in production
	sm, err := status.NewManager(status.Config{
		PodClient: func(ns string) status.PodClient { return api.Pods(ns) },
	})
	if err != nil {
		panic(err)
	}

	// What the runtime reports after SyncPod started the container.
	rs := &runtime.PodStatus{
		ID: pod.UID, IPs: []string{"10.0.0.7"},
		SandboxStatuses: []*runtime.SandboxStatus{{ID: "sb", State: runtime.SandboxStateReady, IPs: []string{"10.0.0.7"}}},
		ContainerStatuses: []*runtime.ContainerStatus{{
			ID: runtime.ContainerID{Type: "containerd", ID: "c1"}, Name: "nginx", State: runtime.ContainerStateRunning,
		}},
	}
	sm.SetPodStatus(pod, status.GeneratePodStatus(pod, rs, nil, status.GenerateOptions{}))
	sm.Sync(context.Background()) // Start(ctx) does this in the background

	got, _ := api.Pod("default", "web")
	fmt.Println(got.Status.Phase, got.Status.PodIP, api.Count(statustest.VerbPatch), "patch")
	// Output: Running 10.0.0.7 1 patch
}

// The pod workers tell the Manager whether a pod's containers may still run,
// by UID; DeletionSafetyFunc adapts their method. Until the workers have
// reconciled with the desired pods (SyncKnownPods) any pod may still run.
func ExampleDeletionSafetyFunc() {
	workers, err := podworkers.New(podworkers.Config{Syncer: &podworkerstest.Syncer{}, Cache: runtime.NewCache()})
	if err != nil {
		panic(err)
	}
	safety := status.DeletionSafetyFunc(workers.CouldHaveRunningContainers)
	if _, err := status.NewManager(status.Config{DeletionSafety: safety}); err != nil {
		panic(err)
	}
	gone := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gone", UID: "uid-gone"}}
	fmt.Println(safety.PodCouldHaveRunningContainers(gone))
	workers.SyncKnownPods(nil)
	fmt.Println(safety.PodCouldHaveRunningContainers(gone))
	// Output:
	// true
	// false
}
