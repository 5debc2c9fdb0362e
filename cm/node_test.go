package cm_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/cm"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
)

// The node controller in TestNodeReportsTheAllocatable runs goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNodeReportsTheAllocatable(t *testing.T) {
	m, _ := newFakeManager(t, 2, cm.Config{SystemReserved: rl("500m", "1Gi"), KubeReserved: rl("250m", "512Mi"), EvictionHard: rl("", "100Mi")})
	fake := nodetest.New()
	ctl, err := node.New(node.Config{
		NodeName: "cm-node", Nodes: fake.Nodes(), Leases: fake.Leases(),
		Capacity: rl("4", "8Gi"),
		Setters:  []node.Setter{m.SetNodeAllocatable},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-ctl.Registered():
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not register")
	}
	st := ctl.Node().Status
	require.Equal(t, "3250m", ptr.To(st.Allocatable[v1.ResourceCPU]).String())
	require.Equal(t, "6556Mi", ptr.To(st.Allocatable[v1.ResourceMemory]).String())
	require.Equal(t, "8Gi", ptr.To(st.Capacity[v1.ResourceMemory]).String(), "capacity stays")
	require.Equal(t, "110", ptr.To(st.Allocatable[v1.ResourcePods]).String(), "pods are not reserved")
}
