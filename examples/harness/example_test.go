package harness_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/examples/harness"
)

// A controller's test: two nodes, a pod bound to each, wait until both run.
func ExampleCluster() {
	c, err := harness.New(harness.Config{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, node := range []string{"node-a", "node-b"} {
		if _, err := c.AddNode(node); err != nil {
			panic(err)
		}
		err := c.Apply(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-" + node, Namespace: "default"},
			Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "web", Image: "nginx:1.27"}}},
		})
		if err != nil {
			panic(err)
		}
	}
	err = c.WaitFor(ctx, func(pods []*v1.Pod) bool {
		running := 0
		for _, p := range pods {
			if p.Status.Phase == v1.PodRunning {
				running++
			}
		}
		return running == 2
	})
	if err != nil {
		panic(err)
	}
	for _, p := range c.Pods() {
		fmt.Println(p.Name, p.Spec.NodeName, p.Status.Phase)
	}
	// Output:
	// web-node-a node-a Running
	// web-node-b node-b Running
}
