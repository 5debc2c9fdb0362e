package status_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
