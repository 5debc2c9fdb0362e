package apiserver

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/podutil"
)

func benchPod(i int, rv, image string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i)),
			ResourceVersion: rv, Labels: map[string]string{"app": "web", "pod-template-hash": "5d8f7c9b6"}},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "web", Image: image,
			Ports: []v1.ContainerPort{{ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("256Mi")},
			}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1"},
	}
}

// BenchmarkApiserverOneChange measures one pod's change with N pods on the
// node, end to end: a MODIFIED watch event through the source and the mux to
// the UPDATE on the mux's output. Building the event's pod is excluded.
func BenchmarkApiserverOneChange(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg, _ := podconfig.NewPodConfig(podconfig.Incremental, podconfig.Options{})
			client := podconfigtest.NewPodClient(0)
			l := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
			for i := 0; i < n; i++ {
				l.Items = append(l.Items, *benchPod(i, "1", "web:1"))
			}
			client.SetList(l)
			w := watch.NewFake()
			client.AddWatcher(w)
			src, _ := New(Config{Client: client, NodeName: node})
			done := make(chan struct{})
			go func() { _ = src.Run(ctx, cfg.Channel(ctx, podutil.ApiserverSource)); close(done) }()
			defer func() { cancel(); <-done }()
			<-cfg.Updates() // the initial ADD of n pods

			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				p := benchPod(n/2, fmt.Sprint(i+2), fmt.Sprintf("web:%d", i+2))
				b.StartTimer()
				w.Modify(p)
				if u := <-cfg.Updates(); u.Op != podconfig.UPDATE || len(u.Pods) != 1 {
					b.Fatalf("got %v with %d pods", u.Op, len(u.Pods))
				}
			}
		})
	}
}
