package nodeutil_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/provider/nodeutil"
	"github.com/nodekit/nodekit/provider/providertest"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/status/statustest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mockTemplate is a node as virtual-kubelet's mock provider's ConfigureNode
// leaves virtual-kubelet's default one.
func mockTemplate(name string, pods string) *v1.Node {
	n := nodeutil.DefaultTemplate(name)
	n.Spec.ProviderID = "mock://" + name
	n.Spec.Taints = []v1.Taint{{Key: "virtual-kubelet.io/provider", Value: "mock", Effect: v1.TaintEffectNoSchedule}}
	n.Labels["node.kubernetes.io/exclude-from-external-load-balancers"] = "true"
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("20"), v1.ResourceMemory: resource.MustParse("100Gi"), v1.ResourcePods: resource.MustParse(pods)}
	n.Status.Capacity, n.Status.Allocatable = rl, rl.DeepCopy()
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	n.Status.NodeInfo = v1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.37.0-mock"}
	n.Status.Phase = v1.NodeRunning
	n.Status.Conditions = []v1.NodeCondition{
		{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is ready."},
		{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse, Reason: "RouteCreated", Message: "RouteController created a route"},
		{Type: v1.NodeDiskPressure}, // virtual-kubelet's empty placeholder
	}
	return n
}

func boundPod(name, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), ResourceVersion: "1",
			CreationTimestamp: metav1.Now()},
		Spec: v1.PodSpec{NodeName: node, SchedulerName: "default-scheduler", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
}

// cluster is the fake apiserver a Node runs against.
type cluster struct {
	nodes *nodetest.Fake
	pods  *statustest.Fake
	src   *podconfigtest.PodClient
}

func newCluster(pods ...*v1.Pod) *cluster {
	c := &cluster{nodes: nodetest.New(), pods: statustest.New(pods...), src: podconfigtest.NewPodClient(0)}
	l := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for _, p := range pods {
		l.Items = append(l.Items, *p)
	}
	c.src.SetList(l)
	c.src.AddWatcher(watch.NewFake())
	return c
}

func (c *cluster) clients() nodeutil.Clients {
	return nodeutil.Clients{
		Pods:      c.src,
		PodStatus: func(ns string) status.PodClient { return c.pods.Pods(ns) },
		Nodes:     c.nodes.Nodes(),
		Leases:    c.nodes.Leases(),
	}
}

func (c *cluster) phase(name string) v1.PodPhase {
	p, ok := c.pods.Pod("default", name)
	if !ok {
		return ""
	}
	return p.Status.Phase
}

// fast keeps the agent's periods short for a test.
func fast(ac *agent.Config) {
	ac.RuntimeCheckPeriod, ac.SyncErrorBackOff = 20*time.Millisecond, 20*time.Millisecond
}

// run runs n until the test ends.
func run(t *testing.T, n *nodeutil.Node) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 30*time.Second, 5*time.Millisecond, what)
}

// TestNewNodeRegistersTheTemplate: the Node is the provider's template,
// as virtual-kubelet registers it, with nothing of the host, and Ready is
// nodekit's.
func TestNewNodeRegistersTheTemplate(t *testing.T) {
	c := newCluster()
	n, err := nodeutil.NewNode("vk-1", providertest.NewNotifier(nil),
		nodeutil.WithClients(c.clients()), nodeutil.WithTemplate(mockTemplate("vk-1", "20")), nodeutil.WithAgentConfig(fast))
	require.NoError(t, err)
	run(t, n)
	var got *v1.Node
	eventually(t, "the Node Ready", func() bool {
		var ok bool
		if got, ok = c.nodes.Node("vk-1"); !ok {
			return false
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue {
				return true
			}
		}
		return false
	})
	assert.Equal(t, "mock://vk-1", got.Spec.ProviderID)
	require.Len(t, got.Spec.Taints, 1)
	assert.Equal(t, "virtual-kubelet.io/provider", got.Spec.Taints[0].Key)
	for k, v := range map[string]string{"type": "virtual-kubelet", "kubernetes.io/role": "agent", v1.LabelHostname: "vk-1",
		"node.kubernetes.io/exclude-from-external-load-balancers": "true", v1.LabelOSStable: "linux", v1.LabelArchStable: "amd64"} {
		assert.Equal(t, v, got.Labels[k], k)
	}
	st := got.Status
	assert.Equal(t, v1.NodeRunning, st.Phase)
	assert.Equal(t, []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}}, st.Addresses)
	assert.Len(t, st.Capacity, 3, "the template's capacity alone: %v", st.Capacity)
	assert.Equal(t, "20", ptr(st.Capacity[v1.ResourcePods]))
	assert.Equal(t, int32(10250), st.DaemonEndpoints.KubeletEndpoint.Port)
	assert.Equal(t, "v1.37.0-mock", st.NodeInfo.KubeletVersion)
	assert.Empty(t, st.NodeInfo.KernelVersion+st.NodeInfo.MachineID+st.NodeInfo.BootID+st.NodeInfo.OSImage, "the host's nodeInfo")
	var types []v1.NodeConditionType
	for _, cond := range st.Conditions {
		types = append(types, cond.Type)
		if cond.Type == v1.NodeReady {
			assert.Equal(t, "KubeletReady", cond.Reason)
		}
		if cond.Type == v1.NodeNetworkUnavailable {
			assert.Equal(t, "RouteCreated", cond.Reason, "the template's condition")
		}
	}
	assert.Contains(t, types, v1.NodeNetworkUnavailable)
	eventually(t, "the Lease", func() bool { _, ok := c.nodes.Lease("vk-1"); return ok })
}

// TestNewNodeAdmission: by default pods past the template's pods capacity
// run, as under virtual-kubelet (the provider decides); WithEnforceCapacity
// refuses them as the kubelet does; the pod filter keeps pods away.
func TestNewNodeAdmission(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []nodeutil.Option
		running []string
		failed  string
		ignored string
	}{
		{"past the capacity: every pod runs", nil, []string{"a", "b", "c"}, "", ""},
		{"WithEnforceCapacity: the third fails OutOfpods", []nodeutil.Option{nodeutil.WithEnforceCapacity()}, []string{"a", "b"}, "c", ""},
		{"WithPodFilter: a refused pod never reaches the provider",
			[]nodeutil.Option{nodeutil.WithPodFilter(func(p *v1.Pod) bool { return p.Name != "c" })}, []string{"a", "b"}, "", "c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pods []*v1.Pod
			for i, name := range []string{"a", "b", "c"} {
				p := boundPod(name, "vk-1")
				p.CreationTimestamp = metav1.NewTime(time.Now().Add(time.Duration(i-10) * time.Second))
				pods = append(pods, p)
			}
			c := newCluster(pods...)
			p := providertest.NewNotifier(nil)
			opts := append([]nodeutil.Option{nodeutil.WithClients(c.clients()), nodeutil.WithTemplate(mockTemplate("vk-1", "2")),
				nodeutil.WithAgentConfig(fast)}, tc.opts...)
			n, err := nodeutil.NewNode("vk-1", p, opts...)
			require.NoError(t, err)
			run(t, n)
			for _, name := range tc.running {
				eventually(t, name+" Running", func() bool { return c.phase(name) == v1.PodRunning })
			}
			if tc.failed != "" {
				// The agent's view: the apiserver's waits for the status
				// manager to hold back the terminal phase no longer.
				var got *v1.Pod
				eventually(t, tc.failed+" Failed", func() bool {
					for _, p := range n.Agent().Pods() {
						if p.Name == tc.failed && p.Status.Phase == v1.PodFailed {
							got = p
							return true
						}
					}
					return false
				})
				assert.Equal(t, "OutOfpods", got.Status.Reason)
			}
			if tc.ignored != "" {
				time.Sleep(100 * time.Millisecond)
				assert.Nil(t, p.Pod("default", tc.ignored), "the filtered pod reached the provider")
				assert.Empty(t, c.phase(tc.ignored))
			}
			assert.Equal(t, len(tc.running), p.Len())
		})
	}
}

// TestNewNodeWritesStatusesByUpdate: a pod the watch delivered (with the
// apiserver's resourceVersion) goes to Running with one update of its
// status and no read, as virtual-kubelet writes it; WithPatchStatus
// patches, as the kubelet.
func TestNewNodeWritesStatusesByUpdate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []nodeutil.Option
		verb string
	}{
		{"default: update", nil, statustest.VerbUpdate},
		{"WithPatchStatus: patch", []nodeutil.Option{nodeutil.WithPatchStatus()}, statustest.VerbPatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(boundPod("a", "vk-1"))
			stored, _ := c.pods.Pod("default", "a")
			c.src.SetList(&v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: stored.ResourceVersion}, Items: []v1.Pod{*stored}})
			opts := append([]nodeutil.Option{nodeutil.WithClients(c.clients()), nodeutil.WithTemplate(mockTemplate("vk-1", "2")),
				nodeutil.WithAgentConfig(fast)}, tc.opts...)
			n, err := nodeutil.NewNode("vk-1", providertest.NewNotifier(nil), opts...)
			require.NoError(t, err)
			run(t, n)
			eventually(t, "a Running", func() bool { return c.phase("a") == v1.PodRunning })
			var verbs []string
			for _, a := range c.pods.Actions() {
				verbs = append(verbs, a.Verb)
			}
			assert.Equal(t, []string{tc.verb}, verbs)
		})
	}
}

// TestNewNodeServesTheKubeletAPI: WithServer serves /pods on its address,
// and the Node's kubelet port is that address's port.
func TestNewNodeServesTheKubeletAPI(t *testing.T) {
	c := newCluster(boundPod("a", "vk-1"))
	n, err := nodeutil.NewNode("vk-1", providertest.NewNotifier(nil), nodeutil.WithClients(c.clients()),
		nodeutil.WithServer("127.0.0.1:0", nil, nil), nodeutil.WithAgentConfig(fast))
	require.NoError(t, err)
	run(t, n)
	eventually(t, "a Running", func() bool { return c.phase("a") == v1.PodRunning })
	resp, err := http.Get(fmt.Sprintf("http://%s/pods", n.Addr()))
	require.NoError(t, err)
	defer resp.Body.Close()
	var list v1.PodList
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	require.Len(t, list.Items, 1)
	assert.Equal(t, "a", list.Items[0].Name)
	eventually(t, "the kubelet port", func() bool {
		got, ok := c.nodes.Node("vk-1")
		return ok && fmt.Sprint(got.Status.DaemonEndpoints.KubeletEndpoint.Port) == portOf(n.Addr().String())
	})
}

func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i+1:]
		}
	}
	return addr
}

func ptr(q resource.Quantity) string { return q.String() }

// TestNewNodeRefusesBadOptions: each unusable option is a clear error.
func TestNewNodeRefusesBadOptions(t *testing.T) {
	clients := newCluster().clients()
	for _, tc := range []struct {
		name string
		p    *providertest.Notifier
		opts []nodeutil.Option
	}{
		{"no provider", nil, []nodeutil.Option{nodeutil.WithClients(clients)}},
		{"no clients", providertest.NewNotifier(nil), nil},
		{"a listen address without a port", providertest.NewNotifier(nil), []nodeutil.Option{nodeutil.WithClients(clients), nodeutil.WithServer("localhost", nil, nil)}},
		{"no status workers", providertest.NewNotifier(nil), []nodeutil.Option{nodeutil.WithClients(clients), nodeutil.WithStatusSyncWorkers(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.p == nil {
				_, err = nodeutil.NewNode("vk-1", nil, tc.opts...)
			} else {
				_, err = nodeutil.NewNode("vk-1", tc.p, tc.opts...)
			}
			assert.ErrorIs(t, err, nodeutil.ErrInvalidConfig)
		})
	}
}
