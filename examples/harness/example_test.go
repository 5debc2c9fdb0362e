package harness_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/sim"
)

// ensurePodPerNode is the controller under test: one "agent-<node>" pod
// bound to every Ready node.
func ensurePodPerNode(ctx context.Context, nodes *sim.NodeClient, pods *sim.PodClient) error {
	list, err := nodes.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, n := range list.Items {
		_, err := pods.Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "agent-" + n.Name},
			Spec:       v1.PodSpec{NodeName: n.Name, Containers: []v1.Container{{Name: "agent", Image: "agent:1"}}},
		}, metav1.CreateOptions{})
		if err != nil && !isExists(err) {
			return err
		}
	}
	return nil
}

func isExists(err error) bool {
	type statusErr interface{ Status() metav1.Status }
	se, ok := err.(statusErr)
	return ok && se.Status().Reason == metav1.StatusReasonAlreadyExists
}

// Three nodes, the controller's pods run on each; a crashed node's pod
// goes not Ready once the node's lease expires.
func Example() {
	ctx := context.Background()
	cl, err := sim.New(sim.Config{})
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		if _, err := cl.AddNode(n); err != nil {
			panic(err)
		}
	}
	_ = cl.RunFor(ctx, time.Second) // the nodes register
	if err := ensurePodPerNode(ctx, cl.Store().Nodes(), cl.Pods("default")); err != nil {
		panic(err)
	}
	_ = cl.RunFor(ctx, 10*time.Second)
	cl.Node("node-b").Stop()
	_ = cl.RunFor(ctx, time.Minute)
	for _, p := range cl.ListPods() {
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || c.Type == v1.PodReady && c.Status == v1.ConditionTrue
		}
		fmt.Println(p.Name, p.Status.Phase, "ready:", ready)
	}
	// Output:
	// agent-node-a Running ready: true
	// agent-node-b Running ready: false
	// agent-node-c Running ready: true
}
