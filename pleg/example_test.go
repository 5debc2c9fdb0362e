package pleg_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
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
	// A program runs `go p.Run(ctx)`; one relist shows what it does.
	if err := p.Relist(context.Background()); err != nil {
		panic(err)
	}
	e := <-p.Watch()
	status, _ := cache.Get(e.ID)
	fmt.Println(e.Type, e.ContainerID, status.IPs)
	// Output: ContainerStarted example://c1 [10.0.0.7]
}

// With a runtime that streams container events, the evented PLEG reports a
// container's start from the stream, without waiting for a relist.
func ExampleNewEvented() {
	rt, err := fake.New(fake.Config{})
	if err != nil {
		panic(err)
	}
	cache := runtime.NewCache()
	g, err := pleg.New(pleg.Config{Runtime: rt, Cache: cache, RelistPeriod: time.Hour})
	if err != nil {
		panic(err)
	}
	e, err := pleg.NewEvented(pleg.EventedConfig{Generic: g, Events: rt})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }() // runs g too; e.Watch() is g.Watch()
	for !e.Streaming() {
		time.Sleep(time.Millisecond)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "nginx"}}}}
	rt.SyncPod(ctx, pod, nil, nil, nil)
	ev := <-e.Watch()
	fmt.Println(ev.ID, ev.Type)
	cancel()
	if err := <-done; err != nil {
		panic(err)
	}
	// Output: uid-web ContainerStarted
}
