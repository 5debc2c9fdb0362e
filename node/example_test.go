package node_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/runtime/fake"
)

func Example() {
	api := nodetest.New() // or a client-go clientset
	rt, _ := fake.New(fake.Config{})
	ctl, err := node.New(node.Config{
		NodeName: "node-1",
		Nodes:    api.Nodes(),  // clientset.CoreV1().Nodes()
		Leases:   api.Leases(), // clientset.CoordinationV1().Leases(v1.NamespaceNodeLease)
		Runtime:  rt,
		MaxPods:  20,
		Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	<-ctl.Registered()
	cancel()
	<-done

	n, _ := api.Node("node-1")
	pods := n.Status.Capacity[v1.ResourcePods]
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			fmt.Println(c.Type, c.Status, c.Reason, pods.String())
		}
	}
	// Output: Ready True KubeletReady 20
}
