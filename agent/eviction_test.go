package agent

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/runtime/fake"
)

// TestEvictionUnderMemoryPressure: with Config.Eviction, memory below the
// hard threshold evicts the BestEffort pod using the most memory through
// the agent's kill path (Failed, Evicted, the kubelet's message, a
// DisruptionTarget condition) while a Guaranteed pod keeps running; the
// Node reports MemoryPressure and allocatable less the threshold; a new
// BestEffort pod is refused with reason Evicted.
func TestEvictionUnderMemoryPressure(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	hog := newPod("hog", v1.RestartPolicyAlways, "c")
	guaranteed := newPod("guaranteed", v1.RestartPolicyAlways, "c")
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("1Gi")}
	guaranteed.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl, Limits: rl}
	var pressure atomic.Bool
	summary := eviction.SummaryProviderFunc(func(ctx context.Context, _ bool) (*statsapi.Summary, error) {
		pods, err := rt.GetPods(ctx, false)
		if err != nil {
			return nil, err
		}
		avail := uint64(4 << 30)
		var stats []statsapi.PodStats
		for _, p := range pods {
			used := uint64(100 << 20)
			if p.ID == hog.UID {
				used = 3 << 30
				if pressure.Load() {
					avail = 50 << 20
				}
			}
			stats = append(stats, statsapi.PodStats{PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.ID)},
				Memory:     &statsapi.MemoryStats{WorkingSetBytes: ptr.To(used)},
				Containers: []statsapi.ContainerStats{{Name: "c", Memory: &statsapi.MemoryStats{WorkingSetBytes: ptr.To(used)}}}})
		}
		return &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "n1",
			Memory: &statsapi.MemoryStats{AvailableBytes: ptr.To(avail), WorkingSetBytes: ptr.To(8<<30 - avail)}}, Pods: stats}, nil
	})
	c := fastConfig(rt)
	api := nodetest.New()
	c.Node = &node.Config{Nodes: api.Nodes(), Leases: api.Leases(), UpdateFrequency: 50 * time.Millisecond,
		Capacity: v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Gi")}}
	c.Eviction = &eviction.Config{Summary: summary, MonitoringInterval: 20 * time.Millisecond}
	r := start(t, c)
	if r.a.Eviction() == nil {
		t.Fatal("Agent.Eviction is nil with Config.Eviction")
	}
	r.set(hog, guaranteed)
	waitFor(t, "pods running", func() bool {
		return r.phase(hog.UID) == v1.PodRunning && r.phase(guaranteed.UID) == v1.PodRunning
	})
	n, _ := api.Node("n1")
	if q := n.Status.Allocatable[v1.ResourceMemory]; q.String() != "8092Mi" {
		t.Errorf("allocatable memory %s, want 8Gi less the 100Mi hard threshold", q.String())
	}

	pressure.Store(true)
	waitFor(t, "hog evicted", func() bool { return r.phase(hog.UID) == v1.PodFailed })
	st := r.pod(hog.UID).Status
	if st.Reason != eviction.Reason || !strings.HasPrefix(st.Message, "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 3Gi, request is 0") {
		t.Errorf("evicted pod: reason %q message %q", st.Reason, st.Message)
	}
	disrupted := false
	for _, cond := range st.Conditions {
		disrupted = disrupted || (cond.Type == v1.DisruptionTarget && cond.Reason == "TerminationByKubelet")
	}
	if !disrupted {
		t.Errorf("evicted pod has no DisruptionTarget condition: %+v", st.Conditions)
	}
	waitFor(t, "MemoryPressure on the Node", func() bool {
		n, _ := api.Node("n1")
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeMemoryPressure {
				return c.Status == v1.ConditionTrue
			}
		}
		return false
	})
	be := newPod("besteffort", v1.RestartPolicyAlways, "c")
	r.set(hog, guaranteed, be)
	waitFor(t, "BestEffort pod refused", func() bool { return r.phase(be.UID) == v1.PodFailed })
	if got := r.pod(be.UID).Status; got.Reason != eviction.Reason || got.Message != "Pod was rejected: The node had condition: [MemoryPressure]. " {
		t.Errorf("refused pod: reason %q message %q", got.Reason, got.Message)
	}
	time.Sleep(100 * time.Millisecond) // a few passes: the hog's memory is gone
	if r.phase(guaranteed.UID) != v1.PodRunning {
		t.Errorf("guaranteed pod %v, want Running", r.phase(guaranteed.UID))
	}
}
