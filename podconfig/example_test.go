package podconfig_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podutil"
)

func ExampleNewPodConfig() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := podconfig.NewPodConfig(podconfig.Incremental, podconfig.Options{})
	if err != nil {
		panic(err)
	}
	ready := podconfig.NewSourcesReady(cfg.SeenAllSources)

	// A source of your own: it sends its whole set, then changes.
	src := cfg.Channel(ctx, "mine")
	pod := func(image string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: image}}},
		}
	}
	src <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod("nginx:1")}}
	src <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod("nginx:1")}} // no change
	src <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod("nginx:2")}}
	src <- podconfig.PodUpdate{Op: podconfig.SET}

	for i := 0; i < 3; i++ {
		u := <-cfg.Updates()
		ready.AddSource(u.Source)
		p := u.Pods[0]
		fmt.Println(u.Op, u.Source, p.Name, p.Spec.Containers[0].Image, p.Annotations[podutil.ConfigSourceAnnotationKey])
	}
	fmt.Println("all sources ready:", ready.AllReady())
	// Output:
	// ADD mine web nginx:1 mine
	// UPDATE mine web nginx:2 mine
	// REMOVE mine web nginx:2 mine
	// all sources ready: true
}
