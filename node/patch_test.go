package node_test

import (
	"context"
	"encoding/json"
	goruntime "runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
)

var _ node.NodePatcher = (*nodetest.PatchingNodeClient)(nil)

func statusPatches(api *nodetest.Fake) int {
	return api.Count("nodes", nodetest.VerbPatch, "status")
}

// TestStatusIsPatched: with a client that can patch (client-go's), the
// status goes as the kubelet's PatchNodeStatus sends it, a strategic merge
// patch of the status subresource without resourceVersion: what others
// write to the Node meanwhile (labels, their own conditions) is neither a
// conflict nor overwritten. A client without Patch gets UpdateStatus.
func TestStatusIsPatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		pr := &pressure{}
		e := start(t, api, func(c *node.Config) { c.Nodes, c.Pressure = api.PatchingNodes(), pr })
		advance(time.Second)
		require.Zero(t, statusUpdates(api), "no UpdateStatus with a patching client")
		before := statusPatches(api)

		// Another writer changes the Node (a label, its own condition)
		// between the controller's read and its write.
		var once sync.Once
		api.SetHook(func(_ context.Context, a nodetest.Action) error {
			if a.Verb == nodetest.VerbPatch {
				once.Do(func() {
					n, _ := api.Node("n1")
					n.Labels["team"] = "a"
					n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: "NetworkUnavailable", Status: v1.ConditionFalse, Reason: "RouteCreated"})
					api.PutNode(n)
				})
			}
			return nil
		})
		pr.mu.Lock()
		pr.mem = true
		pr.mu.Unlock()
		advance(10 * time.Second)

		require.Equal(t, before+1, statusPatches(api), "one patch for the change")
		var last nodetest.Action
		for _, a := range api.Actions() {
			if a.Verb == nodetest.VerbPatch {
				last = a
			}
		}
		require.NoError(t, last.Err)
		var patch map[string]any
		require.NoError(t, json.Unmarshal(last.Patch, &patch))
		_, hasMeta := patch["metadata"]
		assert.False(t, hasMeta, "no resourceVersion, no labels unless put back: %s", last.Patch)
		got := e.node()
		assert.Equal(t, "a", got.Labels["team"], "others' label kept")
		assert.Equal(t, "RouteCreated", cond(got, "NetworkUnavailable").Reason, "others' condition kept")
		assert.Equal(t, v1.ConditionTrue, cond(got, v1.NodeMemoryPressure).Status)
		assert.Equal(t, v1.ConditionTrue, cond(got, v1.NodeReady).Status)
		assert.Zero(t, statusUpdates(api))
		for _, a := range api.Actions() {
			assert.False(t, a.Verb == nodetest.VerbGet && a.Resource == "nodes" && a.ResourceVersion == "", "no read after a conflict")
		}
	})
}

// TestPatchedStatusFields ports the cases of the kubelet's
// TestUpdateNodeAddresses (kubelet_node_status_test.go) and what its
// two-way merge patch does with capacity and labels: the Node stored after
// the patch has exactly the status computed.
func TestPatchedStatusFields(t *testing.T) {
	ip := func(t v1.NodeAddressType, a string) v1.NodeAddress { return v1.NodeAddress{Type: t, Address: a} }
	in, host := v1.NodeInternalIP, v1.NodeHostName
	cases := []struct {
		name   string
		before []v1.NodeAddress
		after  []v1.NodeAddress
	}{
		{"nil to populated", nil, []v1.NodeAddress{ip(in, "127.0.0.1"), ip(host, "n1")}},
		{"empty to populated", []v1.NodeAddress{}, []v1.NodeAddress{ip(in, "127.0.0.1"), ip(host, "n1")}},
		{"multiple addresses of same type, no change", []v1.NodeAddress{ip(in, "127.0.0.1"), ip(in, "127.0.0.2"), ip(host, "n1")},
			[]v1.NodeAddress{ip(in, "127.0.0.1"), ip(in, "127.0.0.2"), ip(host, "n1")}},
		{"1 InternalIP to 2 InternalIP", []v1.NodeAddress{ip(in, "127.0.0.1"), ip(host, "n1")},
			[]v1.NodeAddress{ip(in, "127.0.0.1"), ip(in, "127.0.0.2"), ip(host, "n1")}},
		{"2 InternalIP to 1 InternalIP", []v1.NodeAddress{ip(in, "127.0.0.1"), ip(in, "127.0.0.2"), ip(host, "n1")},
			[]v1.NodeAddress{ip(in, "127.0.0.1"), ip(host, "n1")}},
		{"2 InternalIP to 2 different InternalIP", []v1.NodeAddress{ip(in, "127.0.0.1"), ip(in, "127.0.0.2"), ip(host, "n1")},
			[]v1.NodeAddress{ip(in, "127.0.0.3"), ip(in, "127.0.0.4"), ip(host, "n1")}},
		{"2 InternalIP to reversed order", []v1.NodeAddress{ip(in, "127.0.0.1"), ip(in, "127.0.0.2"), ip(host, "n1")},
			[]v1.NodeAddress{ip(in, "127.0.0.2"), ip(in, "127.0.0.1"), ip(host, "n1")}},
		{"an ExternalIP that went", []v1.NodeAddress{ip(v1.NodeExternalIP, "192.0.2.1"), ip(in, "127.0.0.1"), ip(host, "n1")},
			[]v1.NodeAddress{ip(in, "127.0.0.1"), ip(host, "n1")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := nodetest.New()
				api.PutNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Addresses: tc.before}})
				e := start(t, api, func(c *node.Config) { c.Nodes, c.Addresses = api.PatchingNodes(), tc.after })
				advance(time.Second)
				require.Positive(t, statusPatches(api))
				assert.Equal(t, tc.after, e.node().Status.Addresses)
			})
		})
	}
	t.Run("a resource the machine no longer has leaves capacity and allocatable", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			m := node.NewFakeMachine(node.Machine{NumCores: 2, MemoryCapacity: 1 << 30, EphemeralStorageCapacity: 10 << 30})
			e := start(t, api, func(c *node.Config) { c.Nodes, c.Capacity, c.Machine = api.PatchingNodes(), nil, m })
			_, ok := e.node().Status.Capacity[v1.ResourceEphemeralStorage]
			require.True(t, ok)
			m.Set(node.Machine{NumCores: 2, MemoryCapacity: 1 << 30})
			advance(10 * time.Second)
			n := e.node()
			assert.NotContains(t, n.Status.Capacity, v1.ResourceEphemeralStorage)
			assert.NotContains(t, n.Status.Allocatable, v1.ResourceEphemeralStorage)
			assert.Contains(t, n.Status.Capacity, v1.ResourceCPU)
		})
	})
	t.Run("a removed os or arch label is put back through the patch", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			e := start(t, api, func(c *node.Config) { c.Nodes = api.PatchingNodes() })
			advance(30 * time.Second)
			n := e.node()
			delete(n.Labels, v1.LabelOSStable)
			_, err := api.Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
			require.NoError(t, err)
			advance(10 * time.Second)
			assert.Equal(t, goruntime.GOOS, e.node().Labels[v1.LabelOSStable])
		})
	})
}
