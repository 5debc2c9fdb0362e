package provider_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/provider/providertest"
	"github.com/nodekit/nodekit/runtime"
)

// A virtual-kubelet provider (here the mock) as a runtime: the calls the
// agent makes, and the provider's status as the pod's.
func ExampleNew() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := providertest.NewNotifier(nil) // any virtual-kubelet provider
	rt, err := provider.New(provider.Config{Provider: p})
	if err != nil {
		panic(err)
	}
	// The agent opens the event stream first, which registers NotifyPods:
	// the provider is called only after that.
	events, _ := rt.WatchContainerEvents(ctx)
	go func() {
		for range events {
		}
	}()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "app:1"}}},
	}

	res := rt.SyncPod(ctx, pod, nil, nil, nil) // CreatePod
	fmt.Println("sync error:", res.Error())
	st, _ := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	fmt.Println("phase:", st.APIStatus.Phase, "pod IP:", st.APIStatus.PodIP)

	// DeletePod, then wait until the provider stopped it; its last status
	// comes through NotifyPods.
	_ = rt.KillPod(ctx, pod, runtime.Pod{ID: pod.UID}, nil)
	st, _ = rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	fmt.Println("phase:", st.APIStatus.Phase, "reason:", st.APIStatus.Reason, "pods left:", p.Len())
	// Output:
	// sync error: <nil>
	// phase: Running pod IP: 5.6.7.8
	// phase: Succeeded reason: MockProviderPodDeleted pods left: 0
}
