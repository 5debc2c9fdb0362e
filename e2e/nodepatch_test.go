package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/node"
)

// methodRecorder records the method and path of every request.
type methodRecorder struct {
	rt   http.RoundTripper
	mu   *sync.Mutex
	seen *[]string
}

func (m methodRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	m.mu.Lock()
	*m.seen = append(*m.seen, req.Method+" "+req.URL.Path)
	m.mu.Unlock()
	return m.rt.RoundTrip(req)
}

// TestNodeStatusIsPatched: against a real apiserver, the node controller
// sends its status as the kubelet's PatchNodeStatus does (PATCH of
// nodes/<name>/status, never PUT), the apiserver's strategic merge gives
// the status computed: allocatable as capacity less kube-reserved,
// system-reserved and the hard eviction thresholds, and addresses that
// shrink from a dual-stack pair to one IP replaced whole (the API merges
// them by type, which would keep the IP that went).
func TestNodeStatusIsPatched(t *testing.T) {
	c := startCluster(t)
	var mu sync.Mutex
	var seen []string
	cs, _ := clientset(t, c.RESTConfig(), 50, 100, func(rt http.RoundTripper) http.RoundTripper {
		return methodRecorder{rt: rt, mu: &mu, seen: &seen}
	})
	machine := node.NewFakeMachine(node.Machine{NumCores: 8, MemoryCapacity: 16 << 30, EphemeralStorageCapacity: 100 << 30})
	run := func(ips []string) func() {
		hundredMi := resource.MustParse("100Mi")
		ctl, err := node.New(node.Config{
			NodeName: "patched", Nodes: cs.CoreV1().Nodes(), Machine: machine, NodeIPs: ips,
			PodsPerCore: 4, KubeReserved: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			SystemReserved: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			EvictionHard: []node.HardEviction{{Signal: node.SignalMemoryAvailable, Quantity: &hundredMi},
				{Signal: node.SignalNodeFsAvailable, Percentage: 0.25}},
			UpdateFrequency: 200 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ctl.Run(ctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	stop := run([]string{"10.0.0.7", "fd00::7"})
	n := waitNode(t, cs, "patched", 30*time.Second, func(n *corev1.Node) string {
		if len(n.Status.Addresses) != 3 {
			return fmt.Sprintf("addresses %v", n.Status.Addresses)
		}
		return ""
	})
	for r, want := range map[corev1.ResourceName]string{
		corev1.ResourceCPU: "7500m", corev1.ResourceMemory: "15260Mi", corev1.ResourceEphemeralStorage: "75Gi", corev1.ResourcePods: "32",
	} {
		if q := n.Status.Allocatable[r]; q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("allocatable %s = %s, want %s", r, q.String(), want)
		}
	}
	stop()

	// Restarted with one IP: the IPv6 InternalIP must go.
	machine.Set(node.Machine{NumCores: 8, MemoryCapacity: 32 << 30, EphemeralStorageCapacity: 100 << 30})
	stop = run([]string{"10.0.0.8"})
	defer stop()
	waitNode(t, cs, "patched", 30*time.Second, func(n *corev1.Node) string {
		want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.8"}, {Type: corev1.NodeHostName, Address: "patched"}}
		if !slices.Equal(n.Status.Addresses, want) {
			return fmt.Sprintf("addresses %v, want %v", n.Status.Addresses, want)
		}
		if q := n.Status.Capacity[corev1.ResourceMemory]; q.Cmp(resource.MustParse("32Gi")) != 0 {
			return "memory capacity " + q.String()
		}
		return ""
	})
	mu.Lock()
	defer mu.Unlock()
	var patches int
	for _, s := range seen {
		if strings.HasSuffix(s, "/nodes/patched/status") {
			if !strings.HasPrefix(s, "PATCH ") {
				t.Errorf("status written with %s, want PATCH", s)
			}
			patches++
		}
	}
	if patches == 0 {
		t.Errorf("no status patch among %q", seen)
	}
}
