package node_test

import (
	"context"
	"errors"
	goruntime "runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
)

// TestVirtualNodeRegistration: what Config sets for a node that is not
// this host (a virtual-kubelet provider's) is what the Node carries, and
// nothing of the host is.
func TestVirtualNodeRegistration(t *testing.T) {
	vkInfo := &v1.NodeSystemInfo{OperatingSystem: "windows", Architecture: "arm64", KernelVersion: "vk-kernel", OSImage: "vk-image", MachineID: "vk-machine"}
	for _, tc := range []struct {
		name      string
		configure func(*node.Config)
		check     func(t *testing.T, n *v1.Node)
	}{
		{"a virtual node reports no host capacity, address or nodeInfo", func(c *node.Config) {
			c.Virtual, c.Addresses, c.RootDir = true, nil, "/"
			c.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("20"), v1.ResourceMemory: resource.MustParse("100Gi")}
		}, func(t *testing.T, n *v1.Node) {
			assert.Len(t, n.Status.Capacity, 3, "cpu, memory and pods only: %v", n.Status.Capacity)
			assert.NotContains(t, n.Status.Capacity, v1.ResourceEphemeralStorage, "the host's disk is not the node's")
			assert.Equal(t, []v1.NodeAddress{{Type: v1.NodeHostName, Address: "n1"}}, n.Status.Addresses)
			info := n.Status.NodeInfo
			assert.Empty(t, info.MachineID+info.BootID+info.SystemUUID+info.KernelVersion+info.OSImage, "host nodeInfo: %+v", info)
			assert.Equal(t, "v1.37.0-vk", info.KubeletVersion)
			assert.Equal(t, v1.ConditionTrue, cond(n, v1.NodeReady).Status, "no ephemeral-storage needed: %s", cond(n, v1.NodeReady).Message)
		}},
		{"NodeInfo replaces the host's and names the os and arch labels", func(c *node.Config) {
			c.NodeInfo = vkInfo
		}, func(t *testing.T, n *v1.Node) {
			info := n.Status.NodeInfo
			assert.Equal(t, "vk-kernel", info.KernelVersion)
			assert.Equal(t, "vk-image", info.OSImage)
			assert.Equal(t, "vk-machine", info.MachineID)
			assert.Empty(t, info.BootID, "the host's boot ID")
			assert.Equal(t, "v1.37.0-vk", info.KubeletVersion, "KubeletVersion fills an empty one")
			assert.Equal(t, "fake://0.1.0", info.ContainerRuntimeVersion, "the runtime fills an empty runtime version")
			for k, want := range map[string]string{v1.LabelOSStable: "windows", v1.LabelArchStable: "arm64", "beta.kubernetes.io/os": "windows", "beta.kubernetes.io/arch": "arm64"} {
				assert.Equal(t, want, n.Labels[k], k)
			}
		}},
		{"providerID, annotations and phase are registered", func(c *node.Config) {
			c.ProviderID, c.Phase = "vk://n1", v1.NodeRunning
			c.Annotations = map[string]string{"example.com/owner": "team-a"}
		}, func(t *testing.T, n *v1.Node) {
			assert.Equal(t, "vk://n1", n.Spec.ProviderID)
			assert.Equal(t, "team-a", n.Annotations["example.com/owner"])
			assert.Equal(t, v1.NodeRunning, n.Status.Phase)
		}},
		{"the kubelet sets no phase", nil, func(t *testing.T, n *v1.Node) {
			assert.Empty(t, n.Status.Phase)
			assert.Empty(t, n.Spec.ProviderID)
			assert.Equal(t, goruntime.GOOS, n.Labels[v1.LabelOSStable])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := start(t, nodetest.New(), func(c *node.Config) {
					c.KubeletVersion = "v1.37.0-vk"
					if tc.configure != nil {
						tc.configure(c)
					}
				})
				advance(time.Second)
				tc.check(t, e.node())
				before := statusUpdates(e.api)
				advance(time.Minute)
				assert.Equal(t, before, statusUpdates(e.api), "a steady virtual node sends nothing new (the os and arch labels stay)")
			})
		})
	}
}

// TestReconcileSetsProviderID: an existing Node without a providerID gets
// Config's, and Config's annotations; one with a providerID keeps it (the
// apiserver refuses a change).
func TestReconcileSetsProviderID(t *testing.T) {
	for _, tc := range []struct{ name, existing, want string }{
		{"none set: Config's", "", "vk://n1"},
		{"one set: kept", "cloud://other", "cloud://other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := nodetest.New()
				api.PutNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{"other": "x"}}, Spec: v1.NodeSpec{ProviderID: tc.existing}})
				e := start(t, api, func(c *node.Config) {
					c.ProviderID = "vk://n1"
					c.Annotations = map[string]string{"example.com/owner": "team-a"}
				})
				n := e.node()
				assert.Equal(t, tc.want, n.Spec.ProviderID)
				assert.Equal(t, map[string]string{"other": "x", "example.com/owner": "team-a"}, n.Annotations)
			})
		})
	}
}

// TestProviderPushAppliesWhatItSets: NotifyNodeStatus's node is applied as
// virtual-kubelet applies it: labels, annotations and every status field
// the provider sets, at once; a label or annotation it drops is removed
// unless someone changed it since; its taints count only at registration.
func TestProviderPushAppliesWhatItSets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		p := &fakeProvider{}
		e := start(t, api, func(c *node.Config) {
			c.Provider = p
			c.Labels = map[string]string{"pool": "blue"}
		})
		p.mu.Lock()
		cb := p.cb
		p.mu.Unlock()
		require.NotNil(t, cb)
		swap := &v1.NodeSwapStatus{}
		pushed := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"type": "virtual-kubelet", "gone-later": "1", "pool": "red"},
				Annotations: map[string]string{"vk/a": "1", "vk/b": "2"},
			},
			Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "late", Effect: v1.TaintEffectNoSchedule}}},
			Status: v1.NodeStatus{
				Phase:           v1.NodeRunning,
				Capacity:        v1.ResourceList{v1.ResourceCPU: resource.MustParse("20"), v1.ResourceMemory: resource.MustParse("100Gi"), v1.ResourcePods: resource.MustParse("20")},
				Allocatable:     v1.ResourceList{v1.ResourceCPU: resource.MustParse("19"), v1.ResourceMemory: resource.MustParse("90Gi"), v1.ResourcePods: resource.MustParse("20")},
				Addresses:       []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.9"}},
				DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: 10255}},
				NodeInfo:        v1.NodeSystemInfo{KernelVersion: "vk", OSImage: "mock", Architecture: "amd64", ContainerRuntimeVersion: "mock://1", Swap: swap},
				Conditions:      []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "mock ready"}},
			},
		}
		cb(pushed)
		synctest.Wait()
		n := e.node()
		assert.Equal(t, "virtual-kubelet", n.Labels["type"])
		assert.Equal(t, "blue", n.Labels["pool"], "Config's label is the controller's")
		assert.Equal(t, "1", n.Annotations["vk/a"])
		assert.Equal(t, v1.NodeRunning, n.Status.Phase)
		assert.Equal(t, "19", ptrQ(n.Status.Allocatable[v1.ResourceCPU]))
		assert.Equal(t, "20", ptrQ(n.Status.Capacity[v1.ResourcePods]))
		assert.Equal(t, "192.0.2.9", n.Status.Addresses[0].Address)
		assert.Equal(t, int32(10255), n.Status.DaemonEndpoints.KubeletEndpoint.Port)
		assert.Equal(t, "vk", n.Status.NodeInfo.KernelVersion)
		assert.Equal(t, "mock", n.Status.NodeInfo.OSImage)
		assert.Equal(t, "mock://1", n.Status.NodeInfo.ContainerRuntimeVersion, "the provider's runtime version over the runtime's")
		assert.NotNil(t, n.Status.NodeInfo.Swap)
		assert.Equal(t, "mock ready", cond(n, v1.NodeReady).Message)
		assert.Empty(t, n.Spec.Taints, "a later push's taints are not applied, as virtual-kubelet's")

		// Someone else takes over one of the provider's annotations.
		n.Annotations["vk/b"] = "theirs"
		_, err := api.Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		require.NoError(t, err)
		synctest.Wait()

		next := pushed.DeepCopy()
		delete(next.Labels, "gone-later")
		delete(next.Annotations, "vk/a")
		delete(next.Annotations, "vk/b")
		cb(next)
		synctest.Wait()
		n = e.node()
		assert.NotContains(t, n.Labels, "gone-later", "a label the provider dropped is removed")
		assert.NotContains(t, n.Annotations, "vk/a", "an annotation the provider dropped is removed")
		assert.Equal(t, "theirs", n.Annotations["vk/b"], "a value someone else set is theirs")
		assert.Equal(t, "virtual-kubelet", n.Labels["type"])
		before := statusUpdates(api)
		advance(time.Minute)
		assert.Equal(t, before, statusUpdates(api), "nothing more to send")
	})
}

// TestProviderNodeAtRegistration: a node the provider pushes before
// registration (from within NotifyNodeStatus) is registered with its
// labels, taints and providerID.
func TestProviderNodeAtRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		p := &pushingProvider{n: &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"type": "virtual-kubelet"}},
			Spec:       v1.NodeSpec{ProviderID: "mock://n1", Taints: []v1.Taint{{Key: "virtual-kubelet.io/provider", Value: "mock", Effect: v1.TaintEffectNoSchedule}}},
		}}
		e := start(t, api, func(c *node.Config) { c.Provider = p })
		require.Equal(t, 1, api.Count("nodes", nodetest.VerbCreate, ""))
		created := e.node()
		assert.Equal(t, "mock://n1", created.Spec.ProviderID)
		assert.Equal(t, "virtual-kubelet", created.Labels["type"])
		require.Len(t, created.Spec.Taints, 1)
		assert.Equal(t, "virtual-kubelet.io/provider", created.Spec.Taints[0].Key)
	})
}

type pushingProvider struct{ n *v1.Node }

func (p *pushingProvider) Ping(context.Context) error { return nil }
func (p *pushingProvider) NotifyNodeStatus(_ context.Context, cb func(*v1.Node)) {
	cb(p.n)
}

// TestOnStatusUpdateError: a status update that failed every try goes to
// the handler; nil from it is one more try, an error is the update's.
func TestOnStatusUpdateError(t *testing.T) {
	for _, tc := range []struct {
		name       string
		handlerErr error
		wantSent   bool
		wantTries  int
	}{
		{"nil from the handler: tried once more", nil, true, 6},
		{"an error from the handler: the update failed", errors.New("give up"), false, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := nodetest.New()
				var mu sync.Mutex
				var got []error
				p := &fakeProvider{}
				e := start(t, api, func(c *node.Config) {
					c.Provider = p
					c.OnStatusUpdateError = func(_ context.Context, err error) error {
						mu.Lock()
						defer mu.Unlock()
						got = append(got, err)
						return tc.handlerErr
					}
				})
				advance(time.Second)
				for range 5 {
					api.InjectError("nodes", nodetest.VerbUpdate, apierrors.NewInternalError(errors.New("etcd down")))
				}
				before := statusUpdates(api)
				p.mu.Lock()
				cb := p.cb
				p.mu.Unlock()
				cb(&v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pushed": "yes"}}})
				synctest.Wait()
				mu.Lock()
				require.Len(t, got, 1, "the handler is called once, after the five tries")
				assert.ErrorContains(t, got[0], "etcd down")
				mu.Unlock()
				assert.Equal(t, before+tc.wantTries, statusUpdates(api))
				_, sent := e.node().Labels["pushed"]
				assert.Equal(t, tc.wantSent, sent)
			})
		})
	}
}
