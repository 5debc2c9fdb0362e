package agent_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/runtime/fake"
)

// An agent on the in-memory runtime, fed one pod through a source of the
// caller's; it reports the pod Running with the status it generated.
func ExampleNew() {
	rt, err := fake.New(fake.Config{})
	if err != nil {
		panic(err)
	}
	a, err := agent.New(agent.Config{
		NodeName:        "node-1",
		Runtime:         rt,
		Sources:         []string{"api"},
		RelistPeriod:    50 * time.Millisecond,
		TerminateOnExit: true,
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	a.Channel("api") <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec:       v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
	}}}

	for ctx.Err() == nil {
		if pods := a.Pods(); len(pods) == 1 && pods[0].Status.Phase == v1.PodRunning {
			cs := pods[0].Status.ContainerStatuses[0]
			fmt.Println(pods[0].Name, pods[0].Status.Phase, cs.Name, "ready:", cs.Ready)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel() // Run stops the pod (TerminateOnExit), then returns
	if err := <-done; err != nil {
		panic(err)
	}
	running, _ := rt.GetPods(context.Background(), false)
	fmt.Println("running after Run returned:", len(running))
	// Output:
	// web Running nginx ready: true
	// running after Run returned: 0
}
