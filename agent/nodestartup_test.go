package agent

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/runtime/fake"
)

func TestNodeStartupMetricsOnceTheNodeIsReady(t *testing.T) {
	api := nodetest.New()
	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	c := fastConfig(rt)
	c.Registerer = reg
	c.Node = &node.Config{Nodes: api.Nodes(), Leases: api.Leases(), UpdateFrequency: 50 * time.Millisecond, LeaseDuration: 4 * time.Second}
	start(t, c)
	waitFor(t, "node Ready", func() bool { rc, ok := nodeReady(api); return ok && rc.Status == v1.ConditionTrue })
	waitFor(t, "post-registration duration set", func() bool {
		v, _ := gathered(t, reg, "kubelet_node_startup_post_registration_duration_seconds", nil)
		return v > 0
	})
	for _, name := range []string{"kubelet_node_startup_registration_duration_seconds", "kubelet_node_startup_duration_seconds", "kubelet_node_startup_pre_kubelet_duration_seconds"} {
		if v, ok := gathered(t, reg, name, nil); !ok || v <= 0 {
			t.Errorf("%s = %v (present %v), want a positive duration", name, v, ok)
		}
	}
	total, _ := gathered(t, reg, "kubelet_node_startup_duration_seconds", nil)
	pre, _ := gathered(t, reg, "kubelet_node_startup_pre_kubelet_duration_seconds", nil)
	if total < pre {
		t.Errorf("startup in total %vs is shorter than its part before the agent, %vs", total, pre)
	}
}

func TestNoNodeStartupMetricsWithoutANode(t *testing.T) {
	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	c := fastConfig(rt)
	c.Registerer = reg
	if _, err := New(c); err != nil {
		t.Fatal(err)
	}
	if _, ok := gathered(t, reg, "kubelet_node_startup_duration_seconds", nil); ok {
		t.Error("node startup gauges registered without a Node to start")
	}
}
