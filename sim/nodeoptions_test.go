package sim_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/sim"
)

// Each node gets a pod CIDR of its own and an InternalIP by default, and
// Config.Node, told the node's index, sets its zone and capacity; pod IPs
// come from their node's CIDR, so no two pods share one.
func TestNodeOptionsGiveEachNodeItsNetworkAndLabels(t *testing.T) {
	cl := newCluster(t, sim.Config{Node: func(o *sim.NodeOptions) {
		o.Labels = map[string]string{v1.LabelTopologyZone: fmt.Sprint("zone-", o.Index%2)}
		if o.Index == 2 {
			o.Capacity[v1.ResourceCPU] = resource.MustParse("32")
		}
	}}, "a", "b", "c")
	for i := range 9 {
		create(t, cl, pod(fmt.Sprint("p", i), nil))
	}
	run(t, cl, time.Minute)
	for i, name := range []string{"a", "b", "c"} {
		n, err := cl.Store().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("10.244.%d.0/24", i)
		if n.Spec.PodCIDR != want || len(n.Spec.PodCIDRs) != 1 {
			t.Errorf("%s: podCIDR %q %v, want %s", name, n.Spec.PodCIDR, n.Spec.PodCIDRs, want)
		}
		if len(n.Status.Addresses) == 0 || n.Status.Addresses[0] != (v1.NodeAddress{Type: v1.NodeInternalIP, Address: fmt.Sprintf("172.16.0.%d", i+1)}) {
			t.Errorf("%s: addresses %v", name, n.Status.Addresses)
		}
		if z := n.Labels[v1.LabelTopologyZone]; z != fmt.Sprint("zone-", i%2) {
			t.Errorf("%s: zone %q", name, z)
		}
		if cpu := n.Status.Capacity[v1.ResourceCPU]; (i == 2) != (cpu.Value() == 32) {
			t.Errorf("%s: cpu %v", name, cpu.String())
		}
		if o := cl.Node(name).Options(); o.Index != i || o.Name != name {
			t.Errorf("%s: options %+v", name, o)
		}
	}
	seen := map[string]string{}
	for _, p := range cl.ListPods() {
		n, _ := cl.Store().Nodes().Get(context.Background(), p.Spec.NodeName, metav1.GetOptions{})
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !netip.MustParsePrefix(n.Spec.PodCIDR).Contains(ip) {
			t.Errorf("%s on %s: IP %q not in %s", p.Name, p.Spec.NodeName, p.Status.PodIP, n.Spec.PodCIDR)
		}
		if other, dup := seen[p.Status.PodIP]; dup {
			t.Errorf("%s and %s share %s", p.Name, other, p.Status.PodIP)
		}
		seen[p.Status.PodIP] = p.Name
	}
}
