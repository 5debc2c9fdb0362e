package node_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
)

func rlist(kv ...string) v1.ResourceList {
	rl := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		rl[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return rl
}

// qtys is rl by milli-value, so that 1Ki and 1024 compare equal.
func qtys(rl v1.ResourceList) map[v1.ResourceName]int64 {
	out := map[v1.ResourceName]int64{}
	for k, q := range rl {
		out[k] = q.MilliValue()
	}
	return out
}

// TestMachineInfo ports the cases of the kubelet's nodestatus
// TestMachineInfo (setters_test.go) and its node allocatable cases
// (kubelet_node_status_test.go, node_container_manager_linux_test.go):
// capacity from the machine, pods from MaxPods and PodsPerCore,
// allocatable as capacity minus kube-reserved, system-reserved and the
// hard eviction thresholds.
func TestMachineInfo(t *testing.T) {
	machine := node.Machine{NumCores: 2, MemoryCapacity: 1024, MachineID: "MachineID", SystemUUID: "SystemUUID", BootID: "BootID",
		KernelVersion: "6.1.0", OSImage: "Debian"}
	hundredGi := int64(100 << 30)
	cases := []struct {
		name            string
		machine         node.Machine
		machineErr      error
		configure       func(*node.Config)
		wantCapacity    v1.ResourceList
		wantAllocatable v1.ResourceList
		wantInfo        *v1.NodeSystemInfo
	}{{
		name:            "machine identifiers, basic capacity and allocatable",
		machine:         machine,
		wantCapacity:    rlist("cpu", "2", "memory", "1Ki", "pods", "110"),
		wantAllocatable: rlist("cpu", "2", "memory", "1Ki", "pods", "110"),
		wantInfo:        &v1.NodeSystemInfo{MachineID: "MachineID", SystemUUID: "SystemUUID", BootID: "BootID", KernelVersion: "6.1.0", OSImage: "Debian"},
	}, {
		name:            "podsPerCore greater than zero, but less than maxPods/cores",
		machine:         machine,
		configure:       func(c *node.Config) { c.MaxPods, c.PodsPerCore = 10, 4 },
		wantCapacity:    rlist("cpu", "2", "memory", "1Ki", "pods", "8"),
		wantAllocatable: rlist("cpu", "2", "memory", "1Ki", "pods", "8"),
	}, {
		name:            "podsPerCore greater than maxPods/cores",
		machine:         machine,
		configure:       func(c *node.Config) { c.MaxPods, c.PodsPerCore = 10, 6 },
		wantCapacity:    rlist("cpu", "2", "memory", "1Ki", "pods", "10"),
		wantAllocatable: rlist("cpu", "2", "memory", "1Ki", "pods", "10"),
	}, {
		name:    "allocatable should equal capacity minus reservations",
		machine: machine,
		configure: func(c *node.Config) {
			c.KubeReserved = rlist("cpu", "1", "memory", "1Ki")
		},
		wantCapacity:    rlist("cpu", "2", "memory", "1Ki", "pods", "110"),
		wantAllocatable: rlist("cpu", "1", "memory", "0", "pods", "110"),
	}, {
		name:    "negative capacity resources should be set to 0 in allocatable",
		machine: machine,
		configure: func(c *node.Config) {
			c.SystemReserved = rlist("memory", "1025")
		},
		wantCapacity:    rlist("cpu", "2", "memory", "1Ki", "pods", "110"),
		wantAllocatable: rlist("cpu", "2", "memory", "0", "pods", "110"),
	}, {
		name:            "ephemeral storage is reflected in capacity and allocatable",
		machine:         node.Machine{NumCores: 2, MemoryCapacity: 1024, EphemeralStorageCapacity: 5000},
		wantCapacity:    rlist("cpu", "2", "memory", "1Ki", "ephemeral-storage", "5000", "pods", "110"),
		wantAllocatable: rlist("cpu", "2", "memory", "1Ki", "ephemeral-storage", "5000", "pods", "110"),
	}, {
		// The kubelet's TestUpdateNewNodeStatus: 10e9 bytes, kube-reserved
		// 200m and 100Mi.
		name:    "kube-reserved comes off allocatable, not capacity",
		machine: node.Machine{NumCores: 2, MemoryCapacity: 10e9, EphemeralStorageCapacity: 5000},
		configure: func(c *node.Config) {
			c.KubeReserved = rlist("cpu", "200m", "memory", "100Mi", "ephemeral-storage", "2000")
		},
		wantCapacity:    rlist("cpu", "2", "memory", "10e9", "ephemeral-storage", "5000", "pods", "110"),
		wantAllocatable: rlist("cpu", "1800m", "memory", "9895142400", "ephemeral-storage", "3000", "pods", "110"),
	}, {
		// node_container_manager_linux_test's TestNodeAllocatableReservationForScheduling.
		name:    "system-reserved, kube-reserved and hard eviction add up",
		machine: node.Machine{NumCores: 10, MemoryCapacity: 10 << 30, EphemeralStorageCapacity: hundredGi},
		configure: func(c *node.Config) {
			c.SystemReserved = rlist("cpu", "100m", "memory", "100Mi")
			c.KubeReserved = rlist("cpu", "100m", "memory", "100Mi")
			q := resource.MustParse("100Mi")
			c.EvictionHard = []node.HardEviction{{Signal: node.SignalMemoryAvailable, Quantity: &q}}
		},
		wantCapacity:    rlist("cpu", "10", "memory", "10Gi", "ephemeral-storage", "100Gi", "pods", "110"),
		wantAllocatable: rlist("cpu", "9800m", "memory", "9940Mi", "ephemeral-storage", "100Gi", "pods", "110"),
	}, {
		name:    "percentage thresholds are of the capacity: memory.available and nodefs.available",
		machine: node.Machine{NumCores: 10, MemoryCapacity: 10 << 30, EphemeralStorageCapacity: hundredGi},
		configure: func(c *node.Config) {
			c.EvictionHard = []node.HardEviction{
				{Signal: node.SignalMemoryAvailable, Percentage: 0.25},
				{Signal: node.SignalNodeFsAvailable, Percentage: 0.125},
			}
		},
		wantCapacity:    rlist("cpu", "10", "memory", "10Gi", "ephemeral-storage", "100Gi", "pods", "110"),
		wantAllocatable: rlist("cpu", "10", "memory", "7680Mi", "ephemeral-storage", "89600Mi", "pods", "110"),
	}, {
		name:    "thresholds of other signals keep nothing from allocatable",
		machine: node.Machine{NumCores: 10, MemoryCapacity: 10 << 30, EphemeralStorageCapacity: hundredGi},
		configure: func(c *node.Config) {
			c.EvictionHard = []node.HardEviction{{Signal: "imagefs.available", Percentage: 0.15}, {Signal: "nodefs.inodesFree", Percentage: 0.05}}
		},
		wantCapacity:    rlist("cpu", "10", "memory", "10Gi", "ephemeral-storage", "100Gi", "pods", "110"),
		wantAllocatable: rlist("cpu", "10", "memory", "10Gi", "ephemeral-storage", "100Gi", "pods", "110"),
	}, {
		name:    "Config.Capacity overrides the machine, and the reservations come off it",
		machine: machine,
		configure: func(c *node.Config) {
			c.Capacity = rlist("cpu", "4", "memory", "8Gi")
			c.KubeReserved = rlist("memory", "1Gi")
		},
		wantCapacity:    rlist("cpu", "4", "memory", "8Gi", "pods", "110"),
		wantAllocatable: rlist("cpu", "4", "memory", "7Gi", "pods", "110"),
	}, {
		name:            "a machine info error reports cpu and memory 0 and the pods of MaxPods",
		machineErr:      errors.New("cadvisor is not ready"),
		configure:       func(c *node.Config) { c.MaxPods, c.PodsPerCore = 10, 1 },
		wantCapacity:    rlist("cpu", "0", "memory", "0", "pods", "10"),
		wantAllocatable: rlist("cpu", "0", "memory", "0", "pods", "10"),
		wantInfo:        &v1.NodeSystemInfo{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := node.NewFakeMachine(tc.machine)
			m.SetError(tc.machineErr)
			cfg := node.Config{NodeName: "n1", Nodes: nodetest.New().Nodes(), Machine: m}
			if tc.configure != nil {
				tc.configure(&cfg)
			}
			ctl, err := node.New(cfg)
			require.NoError(t, err)
			n := ctl.InitialNode(t.Context())
			assert.Equal(t, qtys(tc.wantCapacity), qtys(n.Status.Capacity), "capacity")
			assert.Equal(t, qtys(tc.wantAllocatable), qtys(n.Status.Allocatable), "allocatable")
			if w := tc.wantInfo; w != nil {
				got := n.Status.NodeInfo
				assert.Equal(t, *w, v1.NodeSystemInfo{MachineID: got.MachineID, SystemUUID: got.SystemUUID, BootID: got.BootID,
					KernelVersion: got.KernelVersion, OSImage: got.OSImage})
			}
		})
	}
}

// TestMachineIsReadAtEveryStatus: capacity and nodeInfo follow the
// machine (memory added, a reboot), as the kubelet's, which reads
// cadvisor's machine info at every status update.
func TestMachineIsReadAtEveryStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := node.NewFakeMachine(node.Machine{NumCores: 4, MemoryCapacity: 8 << 30, EphemeralStorageCapacity: 100 << 30, BootID: "boot-1"})
		e := start(t, nodetest.New(), func(c *node.Config) {
			c.Capacity, c.Machine = nil, m
			c.KubeReserved = rlist("memory", "1Gi")
		})
		n := e.node()
		assert.Equal(t, "8Gi", ptrQ(n.Status.Capacity[v1.ResourceMemory]))
		assert.Equal(t, "7Gi", ptrQ(n.Status.Allocatable[v1.ResourceMemory]))

		m.Set(node.Machine{NumCores: 8, MemoryCapacity: 16 << 30, EphemeralStorageCapacity: 100 << 30, BootID: "boot-2"})
		advance(10 * time.Second)
		n = e.node()
		assert.Equal(t, "8", ptrQ(n.Status.Capacity[v1.ResourceCPU]))
		assert.Equal(t, "16Gi", ptrQ(n.Status.Capacity[v1.ResourceMemory]))
		assert.Equal(t, "15Gi", ptrQ(n.Status.Allocatable[v1.ResourceMemory]))
		assert.Equal(t, "boot-2", n.Status.NodeInfo.BootID)
	})
}

// TestNodeAddress ports the kubelet's TestNodeAddress cases without a
// cloud provider (setters_test.go): --node-ip's one IP or dual-stack pair
// as InternalIPs in their order, a host name that is an IP as the
// InternalIP, and the Hostname address last.
func TestNodeAddress(t *testing.T) {
	cases := []struct {
		name      string
		hostname  string
		nodeIPs   []string
		addresses []v1.NodeAddress
		want      []v1.NodeAddress
	}{{
		name:    "NodeIP specified",
		nodeIPs: []string{"10.1.1.1"},
		want:    []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.1.1"}, {Type: v1.NodeHostName, Address: "n1"}},
	}, {
		name:    "dual-stack NodeIPs, IPv4 primary",
		nodeIPs: []string{"10.1.1.1", "fd01::1234"},
		want: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.1.1"}, {Type: v1.NodeInternalIP, Address: "fd01::1234"},
			{Type: v1.NodeHostName, Address: "n1"}},
	}, {
		name:    "dual-stack NodeIPs, IPv6 primary, written in canonical form",
		nodeIPs: []string{"fd01:0::1234", "10.1.1.1"},
		want: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "fd01::1234"}, {Type: v1.NodeInternalIP, Address: "10.1.1.1"},
			{Type: v1.NodeHostName, Address: "n1"}},
	}, {
		name:     "hostname override is an IP: used as the node IP",
		hostname: "10.2.2.2",
		want:     []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.2.2.2"}, {Type: v1.NodeHostName, Address: "10.2.2.2"}},
	}, {
		name:     "NodeIP wins over a hostname that is an IP",
		hostname: "10.2.2.2",
		nodeIPs:  []string{"10.1.1.1"},
		want:     []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.1.1"}, {Type: v1.NodeHostName, Address: "10.2.2.2"}},
	}, {
		name:      "a whole address list is taken as given",
		addresses: []v1.NodeAddress{{Type: v1.NodeExternalIP, Address: "192.0.2.1"}},
		want:      []v1.NodeAddress{{Type: v1.NodeExternalIP, Address: "192.0.2.1"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctl, err := node.New(node.Config{NodeName: "n1", Nodes: nodetest.New().Nodes(), Machine: node.Machine{NumCores: 1},
				Hostname: tc.hostname, NodeIPs: tc.nodeIPs, Addresses: tc.addresses})
			require.NoError(t, err)
			assert.Equal(t, tc.want, ctl.InitialNode(t.Context()).Status.Addresses)
		})
	}
	t.Run("an unspecified NodeIP picks a host address, then the Hostname", func(t *testing.T) {
		ctl, err := node.New(node.Config{NodeName: "n1", Nodes: nodetest.New().Nodes(), Machine: node.Machine{}, NodeIPs: []string{"0.0.0.0"}})
		require.NoError(t, err)
		got := ctl.InitialNode(t.Context()).Status.Addresses
		require.NotEmpty(t, got)
		assert.Equal(t, v1.NodeAddress{Type: v1.NodeHostName, Address: "n1"}, got[len(got)-1])
		for _, a := range got[:len(got)-1] {
			assert.Equal(t, v1.NodeInternalIP, a.Type)
		}
	})
}
