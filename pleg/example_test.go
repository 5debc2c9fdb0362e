package pleg_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
)

// oneShotRuntime lists one pod with one running container.
type oneShotRuntime struct{}

func (oneShotRuntime) GetPods(context.Context, bool) ([]*runtime.Pod, error) {
	return []*runtime.Pod{{
		ID: "uid-1", Name: "web", Namespace: "default",
		Containers: []*runtime.Container{{
			ID: runtime.ContainerID{Type: "example", ID: "c1"}, Name: "nginx", State: runtime.ContainerStateRunning,
		}},
	}}, nil
}

func (oneShotRuntime) GetPodStatus(_ context.Context, uid types.UID, name, ns string) (*runtime.PodStatus, error) {
	return &runtime.PodStatus{ID: uid, Name: name, Namespace: ns, IPs: []string{"10.0.0.7"}}, nil
}

func ExampleNew() {
	cache := runtime.NewCache()
	p, err := pleg.New(pleg.Config{Runtime: oneShotRuntime{}, Cache: cache})
	if err != nil {
		panic(err)
	}
	// A program runs `go p.Start(ctx)`; one relist shows what it does.
	if err := p.Relist(context.Background()); err != nil {
		panic(err)
	}
	e := <-p.Watch()
	status, _ := cache.Get(e.ID)
	fmt.Println(e.Type, e.ContainerID, status.IPs)
	// Output: ContainerStarted example://c1 [10.0.0.7]
}
