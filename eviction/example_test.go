package eviction_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/eviction"
)

// A node with 80Mi of its 8Gi free, below the kubelet's default
// memory.available<100Mi: one pass evicts the pod using the most memory
// above its request, and the node refuses BestEffort pods.
func ExampleNew() {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
	summary := eviction.SummaryProviderFunc(func(context.Context, bool) (*statsapi.Summary, error) {
		ws := ptr.To(uint64(2 << 30))
		return &statsapi.Summary{
			Node: statsapi.NodeStats{Memory: &statsapi.MemoryStats{AvailableBytes: ptr.To(uint64(80 << 20)), WorkingSetBytes: ptr.To(uint64(8<<30 - 80<<20))}},
			Pods: []statsapi.PodStats{{PodRef: statsapi.PodReference{Name: "hog", Namespace: "default", UID: "u1"},
				Memory: &statsapi.MemoryStats{WorkingSetBytes: ws}, Containers: []statsapi.ContainerStats{{Name: "app", Memory: &statsapi.MemoryStats{WorkingSetBytes: ws}}}}},
		}, nil
	})
	m, err := eviction.New(eviction.Config{
		Summary:    summary,
		ActivePods: func() []*v1.Pod { return []*v1.Pod{pod} },
		Killer: eviction.PodKillerFunc(func(_ context.Context, pod *v1.Pod, o eviction.KillOptions) error {
			fmt.Printf("evict %s (grace %ds): %q\n", pod.Name, *o.GracePeriodSeconds, o.Message)
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	if _, err := m.Synchronize(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("memory pressure:", m.MemoryPressure())
	r := m.Admit(&admission.PodAdmitAttributes{Pod: &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}})
	fmt.Printf("BestEffort pod admitted: %v (%s: %q)\n", r.Admit, r.Reason, r.Message)
	// Output:
	// evict hog (grace 1s): "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. Container app was using 2Gi, request is 0, has larger consumption of memory. "
	// memory pressure: true
	// BestEffort pod admitted: false (Evicted: "The node had condition: [MemoryPressure]. ")
}
