package node_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var nodesGR = schema.GroupResource{Resource: "nodes"}

// env is one controller on a fake apiserver inside a synctest bubble.
type env struct {
	t      *testing.T
	api    *nodetest.Fake
	rt     *fake.Runtime
	ctl    *node.Controller
	cancel context.CancelFunc
	done   chan error
}

func baseConfig(api *nodetest.Fake, rt runtime.Runtime) node.Config {
	return node.Config{
		NodeName:  "n1",
		Nodes:     api.Nodes(),
		Leases:    api.Leases(),
		Runtime:   rt,
		Capacity:  v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourceEphemeralStorage: resource.MustParse("100Gi")},
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeHostName, Address: "n1"}},
	}
}

// start runs a controller; configure adjusts the base config. It must be
// called inside a synctest bubble; Run has registered when it returns
// unless registration is refused.
func start(t *testing.T, api *nodetest.Fake, configure func(*node.Config)) *env {
	t.Helper()
	rt, err := fake.New(fake.Config{})
	require.NoError(t, err)
	cfg := baseConfig(api, rt)
	if configure != nil {
		configure(&cfg)
	}
	ctl, err := node.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	e := &env{t: t, api: api, rt: rt, ctl: ctl, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- ctl.Run(ctx) }()
	t.Cleanup(func() { e.stop() })
	synctest.Wait()
	return e
}

func (e *env) stop() error {
	if e.cancel == nil {
		return nil
	}
	e.cancel()
	e.cancel = nil
	return <-e.done
}

// advance moves the bubble's clock by d and lets everything settle.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func (e *env) node() *v1.Node {
	e.t.Helper()
	n, ok := e.api.Node("n1")
	require.True(e.t, ok, "node n1 not stored")
	return n
}

func cond(n *v1.Node, t v1.NodeConditionType) v1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.NodeCondition{}
}

func statusUpdates(api *nodetest.Fake) int {
	return api.Count("nodes", nodetest.VerbUpdate, "status")
}

func leaseUpdates(api *nodetest.Fake) int { return api.Count("leases", nodetest.VerbUpdate, "") }

func TestRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		e := start(t, api, func(c *node.Config) {
			c.Labels = map[string]string{"pool": "a"}
			c.Taints = []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}
			c.MaxPods = 42
			c.KubeletVersion = "v1.37.0-nodekit"
			c.Allocatable = v1.ResourceList{v1.ResourceMemory: resource.MustParse("7Gi")}
			c.Hostname = "host-1"
			c.Addresses = nil
		})
		n := e.node()
		assert.Equal(t, "host-1", n.Labels[v1.LabelHostname])
		assert.Contains(t, n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: "host-1"}, "default addresses")
		assert.NotEmpty(t, n.Labels[v1.LabelOSStable])
		assert.NotEmpty(t, n.Labels[v1.LabelArchStable])
		assert.Equal(t, "a", n.Labels["pool"])
		assert.Equal(t, "dedicated", n.Spec.Taints[0].Key)
		pods := n.Status.Capacity[v1.ResourcePods]
		assert.Equal(t, int64(42), pods.Value())
		assert.Equal(t, "4", ptrQ(n.Status.Capacity[v1.ResourceCPU]))
		assert.Equal(t, "7Gi", ptrQ(n.Status.Allocatable[v1.ResourceMemory]), "allocatable override")
		assert.Equal(t, "8Gi", ptrQ(n.Status.Capacity[v1.ResourceMemory]))
		assert.Equal(t, "100Gi", ptrQ(n.Status.Allocatable[v1.ResourceEphemeralStorage]), "allocatable defaults to capacity")
		assert.Equal(t, int32(10250), n.Status.DaemonEndpoints.KubeletEndpoint.Port)
		assert.Equal(t, "fake://0.1.0", n.Status.NodeInfo.ContainerRuntimeVersion)
		assert.Equal(t, "v1.37.0-nodekit", n.Status.NodeInfo.KubeletVersion)
		assert.NotEmpty(t, n.Status.NodeInfo.OperatingSystem)
		ready := cond(n, v1.NodeReady)
		assert.Equal(t, v1.ConditionTrue, ready.Status)
		assert.Equal(t, "KubeletReady", ready.Reason)
		assert.Equal(t, "kubelet is posting ready status", ready.Message)
		assert.Equal(t, v1.NodeReady, n.Status.Conditions[len(n.Status.Conditions)-1].Type, "Ready comes last")
		for _, c := range []struct {
			t      v1.NodeConditionType
			reason string
		}{{v1.NodeMemoryPressure, "KubeletHasSufficientMemory"}, {v1.NodeDiskPressure, "KubeletHasNoDiskPressure"}, {v1.NodePIDPressure, "KubeletHasSufficientPID"}} {
			got := cond(n, c.t)
			assert.Equal(t, v1.ConditionFalse, got.Status, c.t)
			assert.Equal(t, c.reason, got.Reason, c.t)
		}

		l, ok := api.Lease("n1")
		require.True(t, ok, "lease created")
		assert.Equal(t, "n1", *l.Spec.HolderIdentity)
		assert.Equal(t, int32(40), *l.Spec.LeaseDurationSeconds)
		assert.Equal(t, "kube-node-lease", l.Namespace)
		require.Len(t, l.OwnerReferences, 1)
		assert.Equal(t, n.UID, l.OwnerReferences[0].UID)
		assert.Equal(t, "Node", l.OwnerReferences[0].Kind)

		got, err := e.ctl.Get(t.Context(), "n1", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, n.UID, got.UID, "Get serves the registered Node")
		_, err = e.ctl.Get(t.Context(), "other", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err))
		assert.Equal(t, 1, api.Count("nodes", nodetest.VerbCreate, ""))
	})
}

func ptrQ(q resource.Quantity) string { return q.String() }

func TestReconcileExistingNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		old := metav1.NewTime(time.Now().Add(-time.Hour))
		api.PutNode(&v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1",
				Labels:      map[string]string{v1.LabelOSStable: "plan9", "team": "x"},
				Annotations: map[string]string{"note": "keep"}},
			Spec: v1.NodeSpec{PodCIDR: "10.1.0.0/24", Taints: []v1.Taint{{Key: "foreign", Effect: v1.TaintEffectNoSchedule}}},
			Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
				{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse, Reason: "RouteCreated", LastTransitionTime: old},
				{Type: v1.NodeReady, Status: v1.ConditionUnknown, Reason: "NodeStatusUnknown", LastTransitionTime: old},
			}},
		})
		before, _ := api.Node("n1")
		start(t, api, func(c *node.Config) { c.Taints = []v1.Taint{{Key: "mine", Effect: v1.TaintEffectNoSchedule}} })
		n, _ := api.Node("n1")
		assert.Equal(t, before.UID, n.UID, "the existing node is kept")
		assert.NotEqual(t, "plan9", n.Labels[v1.LabelOSStable], "owned label updated")
		assert.Equal(t, "n1", n.Labels[v1.LabelHostname])
		assert.Equal(t, "x", n.Labels["team"], "foreign label kept")
		assert.Equal(t, "keep", n.Annotations["note"])
		assert.Equal(t, "10.1.0.0/24", n.Spec.PodCIDR)
		require.Len(t, n.Spec.Taints, 1, "taints are registration-only, as the kubelet's")
		assert.Equal(t, "foreign", n.Spec.Taints[0].Key)
		assert.Equal(t, 1, statusUpdates(api), "a stale status is sent at once")
		nu := cond(n, v1.NodeNetworkUnavailable)
		assert.Equal(t, "RouteCreated", nu.Reason, "others' conditions kept")
		assert.Equal(t, v1.ConditionTrue, cond(n, v1.NodeReady).Status)
		rc := cond(n, v1.NodeReady)
		assert.False(t, rc.LastTransitionTime.Equal(&old), "Ready's transition moved")
	})
}

type fakeProvider struct {
	mu      sync.Mutex
	pingErr error
	cb      func(*v1.Node)
}

func (p *fakeProvider) Ping(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pingErr
}

func (p *fakeProvider) NotifyNodeStatus(_ context.Context, cb func(*v1.Node)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cb = cb
}

func (p *fakeProvider) setPingErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pingErr = err
}

type pressure struct {
	mu              sync.Mutex
	mem, disk, pids bool
}

func (p *pressure) MemoryPressure() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.mem }
func (p *pressure) DiskPressure() bool   { p.mu.Lock(); defer p.mu.Unlock(); return p.disk }
func (p *pressure) PIDPressure() bool    { p.mu.Lock(); defer p.mu.Unlock(); return p.pids }

type health struct {
	mu  sync.Mutex
	err error
}

func (h *health) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *health) set(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
}

func TestConditionTransitions(t *testing.T) {
	type knobs struct {
		rt   *fake.Runtime
		pleg *health
		prov *fakeProvider
		pr   *pressure
	}
	cases := []struct {
		name    string
		typ     v1.NodeConditionType
		status  v1.ConditionStatus
		reason  string
		message string
		apply   func(k knobs)
	}{
		{"runtime not ready makes the node NotReady", v1.NodeReady, v1.ConditionFalse, "KubeletNotReady",
			"container runtime not ready: RuntimeReady=false reason:ContainerdDown message:socket gone",
			func(k knobs) {
				k.rt.SetCondition(runtime.RuntimeCondition{Type: runtime.RuntimeReady, Status: false, Reason: "ContainerdDown", Message: "socket gone"})
			}},
		{"network not ready makes the node NotReady", v1.NodeReady, v1.ConditionFalse, "KubeletNotReady",
			"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized",
			func(k knobs) {
				k.rt.SetCondition(runtime.RuntimeCondition{Type: runtime.NetworkReady, Status: false, Reason: "NetworkPluginNotReady", Message: "cni config uninitialized"})
			}},
		{"unhealthy PLEG makes the node NotReady", v1.NodeReady, v1.ConditionFalse, "KubeletNotReady",
			"PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s",
			func(k knobs) { k.pleg.set(errors.New("pleg was last seen active 3m0s ago; threshold is 3m0s")) }},
		{"failing provider ping makes the node NotReady", v1.NodeReady, v1.ConditionFalse, "KubeletNotReady",
			"node provider is not healthy: cloud unreachable",
			func(k knobs) { k.prov.setPingErr(errors.New("cloud unreachable")) }},
		{"several problems are joined in the kubelet's order (health checks before the runtime's readiness)", v1.NodeReady, v1.ConditionFalse, "KubeletNotReady",
			"[PLEG is not healthy: stuck, container runtime not ready: RuntimeReady=false reason:R message:M]",
			func(k knobs) {
				k.rt.SetCondition(runtime.RuntimeCondition{Type: runtime.RuntimeReady, Reason: "R", Message: "M"})
				k.pleg.set(errors.New("stuck"))
			}},
		{"memory pressure", v1.NodeMemoryPressure, v1.ConditionTrue, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
			func(k knobs) { k.pr.mu.Lock(); k.pr.mem = true; k.pr.mu.Unlock() }},
		{"disk pressure", v1.NodeDiskPressure, v1.ConditionTrue, "KubeletHasDiskPressure", "kubelet has disk pressure",
			func(k knobs) { k.pr.mu.Lock(); k.pr.disk = true; k.pr.mu.Unlock() }},
		{"PID pressure", v1.NodePIDPressure, v1.ConditionTrue, "KubeletHasInsufficientPID", "kubelet has insufficient PID available",
			func(k knobs) { k.pr.mu.Lock(); k.pr.pids = true; k.pr.mu.Unlock() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := nodetest.New()
				k := knobs{pleg: &health{}, prov: &fakeProvider{}, pr: &pressure{}}
				e := start(t, api, func(c *node.Config) {
					c.HealthChecks = []node.HealthCheck{{Name: "PLEG", Check: k.pleg.check}}
					c.Provider = k.prov
					c.Pressure = k.pr
				})
				k.rt = e.rt
				before := cond(e.node(), tc.typ)
				require.NotEqual(t, tc.status, before.Status)
				advance(30 * time.Second)
				require.Equal(t, 0, statusUpdates(api), "nothing changed, nothing sent")

				tc.apply(k)
				advance(10 * time.Second)
				assert.Equal(t, 1, statusUpdates(api), "a change is sent at the next computation, not after the report frequency")
				got := cond(e.node(), tc.typ)
				assert.Equal(t, tc.status, got.Status)
				assert.Equal(t, tc.reason, got.Reason)
				assert.Equal(t, tc.message, got.Message)
				assert.True(t, got.LastTransitionTime.After(before.LastTransitionTime.Time), "transition time moved with the status")
				transition := got.LastTransitionTime

				advance(5 * time.Minute)
				got = cond(e.node(), tc.typ)
				assert.True(t, got.LastTransitionTime.Equal(&transition), "no transition while the status holds")
				assert.True(t, got.LastHeartbeatTime.After(transition.Time), "heartbeat moves with every sent update")
			})
		})
	}
}

// TestRuntimeIsDownOnlyAfterRuntimeDownAfter: as the kubelet's runtime
// state, a failed Status call leaves the runtime's last answer standing;
// the node says the runtime is down once it has not answered ready for
// RuntimeDownAfter (30s).
func TestRuntimeIsDownOnlyAfterRuntimeDownAfter(t *testing.T) {
	ready := func(t *testing.T, e *env) v1.NodeCondition {
		t.Helper()
		return cond(e.node(), v1.NodeReady)
	}
	t.Run("failures shorter than 30s leave the node Ready, longer ones make it NotReady, an answer makes it Ready", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := start(t, nodetest.New(), nil)
			advance(30 * time.Second)
			require.Equal(t, v1.ConditionTrue, ready(t, e).Status)

			require.NoError(t, e.rt.SetFailureRate("Status", 1))
			advance(15 * time.Second)
			assert.Equal(t, v1.ConditionTrue, ready(t, e).Status, "15s of failed calls: the last answer stands")
			advance(30 * time.Second)
			got := ready(t, e)
			assert.Equal(t, v1.ConditionFalse, got.Status)
			assert.Equal(t, "container runtime is down", got.Message)

			require.NoError(t, e.rt.SetFailureRate("Status", 0))
			advance(10 * time.Second)
			assert.Equal(t, v1.ConditionTrue, ready(t, e).Status, "ready again at the next answer")
		})
	})
	t.Run("a not-ready answer stands while calls fail, and is joined by down after 30s", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := start(t, nodetest.New(), nil)
			advance(30 * time.Second)
			e.rt.SetCondition(runtime.RuntimeCondition{Type: runtime.RuntimeReady, Status: false, Reason: "R", Message: "M"})
			advance(10 * time.Second)
			require.NoError(t, e.rt.SetFailureRate("Status", 1))
			advance(10 * time.Second)
			assert.Equal(t, "container runtime not ready: RuntimeReady=false reason:R message:M", ready(t, e).Message)
			advance(30 * time.Second)
			assert.Equal(t, "[container runtime is down, container runtime not ready: RuntimeReady=false reason:R message:M]", ready(t, e).Message)
		})
	})
	t.Run("a runtime that never answered has not completed its check, and the network state is unknown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			e := start(t, api, func(c *node.Config) { require.NoError(t, c.Runtime.(*fake.Runtime).SetFailureRate("Status", 1)) })
			advance(10 * time.Second)
			got := ready(t, e)
			assert.Equal(t, v1.ConditionFalse, got.Status)
			assert.Equal(t, "[container runtime status check may not have completed yet, network state unknown]", got.Message)
		})
	})
}

func TestReportFrequency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		pleg := &health{}
		e := start(t, api, func(c *node.Config) {
			c.HealthChecks = []node.HealthCheck{{Name: "PLEG", Check: pleg.check}}
		})
		advance(5*time.Minute - time.Second)
		assert.Equal(t, 0, statusUpdates(api), "no update while unchanged for less than 5m")
		advance(10 * time.Second)
		assert.Equal(t, 1, statusUpdates(api), "one update once 5m passed")
		advance(4 * time.Minute)
		assert.Equal(t, 1, statusUpdates(api))

		pleg.set(errors.New("stuck"))
		e.ctl.Trigger()
		synctest.Wait()
		assert.Equal(t, 2, statusUpdates(api), "a readiness change goes at once on Trigger")
		assert.Equal(t, v1.ConditionFalse, cond(e.node(), v1.NodeReady).Status)
	})
}

// TestIdleRequestsPerHour: the requests of an hour in which nothing
// changes (docs/performance.md). The fake's watch never ends on its own;
// an apiserver's ends every 5 to 10 minutes.
func TestIdleRequestsPerHour(t *testing.T) {
	tests := []struct {
		name    string
		nodes   func(*nodetest.Fake) node.NodeClient
		gets    int
		watches int
	}{
		{"a client that watches reads the Node from its watch", func(api *nodetest.Fake) node.NodeClient { return api.Nodes() }, 0, 1},
		{"a client that cannot watch reads the Node at every computation, as the kubelet",
			func(api *nodetest.Fake) node.NodeClient { return nodesOnly{api.Nodes()} }, 360, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := nodetest.New()
				start(t, api, func(c *node.Config) { c.Nodes = tt.nodes(api) })
				api.ClearActions()
				advance(time.Hour)
				assert.Equal(t, 360, leaseUpdates(api), "lease renewals per hour")
				assert.Equal(t, 12, statusUpdates(api), "status updates per hour")
				assert.Equal(t, tt.gets, api.Count("nodes", nodetest.VerbGet, ""), "Node GETs per hour")
				assert.Len(t, api.Actions(), 372+tt.gets, "nothing else: %v", api.Actions())
				assert.Equal(t, tt.watches, api.Watches(), "watches of the Node")
			})
		})
	}
}

func TestLease(t *testing.T) {
	t.Run("renewed every quarter of its duration", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			start(t, api, func(c *node.Config) { c.LeaseDuration = 20 * time.Second })
			l, _ := api.Lease("n1")
			created := l.Spec.RenewTime.Time
			assert.Equal(t, int32(20), *l.Spec.LeaseDurationSeconds)
			advance(5*time.Second - time.Millisecond)
			assert.Equal(t, 0, leaseUpdates(api))
			advance(time.Millisecond)
			assert.Equal(t, 1, leaseUpdates(api))
			l, _ = api.Lease("n1")
			assert.Equal(t, 5*time.Second, l.Spec.RenewTime.Sub(created))
		})
	})
	t.Run("recreated after deletion", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			e := start(t, api, nil)
			api.Delete("leases", "n1")
			advance(10 * time.Second)
			l, ok := api.Lease("n1")
			require.True(t, ok, "lease recreated")
			assert.Equal(t, e.node().UID, l.OwnerReferences[0].UID)
			assert.Equal(t, 2, api.Count("leases", nodetest.VerbCreate, ""))
		})
	})
	t.Run("a lease changed by someone else is read again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			start(t, api, nil)
			l, _ := api.Lease("n1")
			l.Labels = map[string]string{"touched": "yes"}
			api.PutLease(l)
			advance(10 * time.Second)
			got, _ := api.Lease("n1")
			assert.Equal(t, "yes", got.Labels["touched"])
			assert.True(t, got.Spec.RenewTime.After(l.Spec.RenewTime.Time), "renewed after the conflict")
		})
	})
}

func TestAPIServerErrors(t *testing.T) {
	t.Run("lease errors back off 200ms doubling to 7s", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			start(t, api, nil)
			api.ClearActions()
			// The renewal fails (all its attempts in a row), then reading
			// the Lease fails 8 times.
			for range kubeletLeaseUpdates {
				api.InjectError("leases", nodetest.VerbUpdate, apierrors.NewInternalError(errors.New("etcd down")))
			}
			for range 8 {
				api.InjectError("leases", nodetest.VerbGet, apierrors.NewInternalError(errors.New("etcd down")))
			}
			var gets []time.Time
			t0 := time.Now()
			api.SetHook(func(_ context.Context, a nodetest.Action) error {
				if a.Resource == "leases" && a.Verb == nodetest.VerbGet {
					gets = append(gets, time.Now())
				}
				return nil
			})
			advance(10 * time.Second) // the renewal
			advance(27 * time.Second) // 26.6s of back-off, not the next renewal
			require.Len(t, gets, 9)
			var waits []time.Duration
			for i := 1; i < len(gets); i++ {
				waits = append(waits, gets[i].Sub(gets[i-1]))
			}
			want := []time.Duration{200, 400, 800, 1600, 3200, 6400, 7000, 7000}
			for i := range want {
				want[i] *= time.Millisecond
			}
			assert.Equal(t, want, waits)
			assert.Equal(t, 10*time.Second, gets[0].Sub(t0))
			l, _ := api.Lease("n1")
			assert.Equal(t, gets[8], l.Spec.RenewTime.Time, "renewed once the read worked")
		})
	})
	t.Run("status conflict is read again and retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			pleg := &health{}
			e := start(t, api, func(c *node.Config) {
				c.HealthChecks = []node.HealthCheck{{Name: "PLEG", Check: pleg.check}}
			})
			n := e.node()
			n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: "FrequentKubeletRestart", Status: v1.ConditionFalse})
			var once sync.Once
			api.SetHook(func(_ context.Context, a nodetest.Action) error {
				if a.Subresource == "status" {
					// Another writer just before ours: our copy is stale.
					once.Do(func() { api.PutNode(n) })
				}
				return nil
			})
			pleg.set(errors.New("stuck"))
			advance(10 * time.Second)
			got := e.node()
			assert.Equal(t, v1.ConditionFalse, cond(got, v1.NodeReady).Status)
			assert.Equal(t, v1.ConditionFalse, cond(got, "FrequentKubeletRestart").Status, "the other writer's condition kept")
			assert.Equal(t, 2, statusUpdates(api), "one conflict, one success")
			assert.Equal(t, 1, api.Count("nodes", nodetest.VerbGet, ""))
		})
	})
	t.Run("registration retries until the apiserver answers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			for range 3 {
				api.InjectError("nodes", nodetest.VerbCreate, apierrors.NewServiceUnavailable("starting"))
			}
			e := start(t, api, nil)
			select {
			case <-e.ctl.Registered():
				t.Fatal("registered despite errors")
			default:
			}
			_, err := e.ctl.Get(t.Context(), "n1", metav1.GetOptions{})
			assert.ErrorContains(t, err, "not registered")
			advance(200*time.Millisecond + 400*time.Millisecond + 800*time.Millisecond)
			<-e.ctl.Registered()
			assert.Equal(t, 4, api.Count("nodes", nodetest.VerbCreate, ""))
		})
	})
	t.Run("a refused Node stops Run with the apiserver's reason", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			api.InjectError("nodes", nodetest.VerbCreate, apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "n1",
				field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), "bad value", "must be no more than 63 characters")}))
			e := start(t, api, nil)
			err := <-e.done
			e.cancel()
			e.cancel = nil
			require.Error(t, err)
			assert.Contains(t, err.Error(), "metadata.labels")
			assert.Contains(t, err.Error(), `registering Node "n1"`)

			api2 := nodetest.New()
			api2.InjectError("nodes", nodetest.VerbCreate, apierrors.NewForbidden(nodesGR, "n1", errors.New(`User "bob" cannot create resource "nodes"`)))
			e2 := start(t, api2, nil)
			err = <-e2.done
			e2.cancel()
			e2.cancel = nil
			assert.ErrorContains(t, err, `cannot create resource "nodes"`)
		})
	})
	t.Run("a deleted Node stays deleted, as with the kubelet, until someone creates it again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			e := start(t, api, nil)
			created := e.node()
			api.Delete("nodes", "n1")
			synctest.Wait()
			assert.Nil(t, e.ctl.SharedNode(), "forgotten as soon as the watch says so: admission checks against InitialNode")
			advance(time.Minute)
			_, ok := api.Node("n1")
			assert.False(t, ok, "not registered again")
			assert.Equal(t, 1, api.Count("nodes", nodetest.VerbCreate, ""))

			// An operator creates it again: its status is kept from then on.
			again := created.DeepCopy()
			again.ResourceVersion, again.UID, again.Status = "", "", v1.NodeStatus{}
			_, err := api.Nodes().Create(t.Context(), again, metav1.CreateOptions{})
			require.NoError(t, err)
			advance(10 * time.Second)
			assert.Equal(t, v1.ConditionTrue, cond(e.node(), v1.NodeReady).Status, "the controller keeps the new Node's status")
			assert.Equal(t, 2, api.Count("nodes", nodetest.VerbCreate, ""), "the test's create: the controller created nothing")
		})
	})
	t.Run("with RegisterAgain a deleted Node is registered again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			pleg := &health{}
			e := start(t, api, func(c *node.Config) {
				c.HealthChecks = []node.HealthCheck{{Name: "PLEG", Check: pleg.check}}
				c.RegisterAgain = true
			})
			old := e.node().UID
			api.Delete("nodes", "n1")
			synctest.Wait()
			assert.Nil(t, e.ctl.SharedNode(), "forgotten as soon as the watch says so: admission checks against InitialNode")
			pleg.set(errors.New("stuck"))
			advance(10 * time.Second)
			n := e.node()
			assert.NotEqual(t, old, n.UID)
			assert.Equal(t, 2, api.Count("nodes", nodetest.VerbCreate, ""))
			advance(10 * time.Second)
			l, _ := api.Lease("n1")
			assert.Equal(t, n.UID, l.OwnerReferences[0].UID, "the lease follows the new Node")
		})
	})
}

// TestKubeletStatusFidelity: details of the kubelet's node status that a
// cluster's components or operators see.
func TestKubeletStatusFidelity(t *testing.T) {
	t.Run("the Node is registered with the stable and beta os and arch labels", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := start(t, nodetest.New(), nil)
			l := e.node().Labels
			assert.Equal(t, goruntime.GOOS, l[v1.LabelOSStable])
			assert.Equal(t, goruntime.GOARCH, l[v1.LabelArchStable])
			assert.Equal(t, goruntime.GOOS, l["beta.kubernetes.io/os"])
			assert.Equal(t, goruntime.GOARCH, l["beta.kubernetes.io/arch"])
		})
	})
	t.Run("a removed os or arch label is put back by the next status update", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			e := start(t, api, nil)
			advance(30 * time.Second)
			n := e.node()
			delete(n.Labels, v1.LabelOSStable)
			n.Labels[v1.LabelArchStable] = "sparc"
			_, err := api.Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
			require.NoError(t, err)
			before := statusUpdates(api)
			advance(10 * time.Second)
			assert.Equal(t, before+1, statusUpdates(api), "a missing label is a change, sent at once")
			l := e.node().Labels
			assert.Equal(t, goruntime.GOOS, l[v1.LabelOSStable])
			assert.Equal(t, goruntime.GOARCH, l[v1.LabelArchStable])
		})
	})
	t.Run("a pressure condition's reason and message change only with its status", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := nodetest.New()
			pr := &pressure{}
			e := start(t, api, func(c *node.Config) { c.Pressure = pr })
			advance(10 * time.Second)
			n := e.node()
			for i := range n.Status.Conditions {
				if n.Status.Conditions[i].Type == v1.NodeMemoryPressure {
					n.Status.Conditions[i].Reason, n.Status.Conditions[i].Message = "SomeoneElses", "set by an operator"
				}
			}
			_, err := api.Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
			require.NoError(t, err)
			advance(6 * time.Minute)
			got := cond(e.node(), v1.NodeMemoryPressure)
			assert.Equal(t, "SomeoneElses", got.Reason, "kept while the status holds")
			assert.Equal(t, "set by an operator", got.Message)

			pr.mu.Lock()
			pr.mem = true
			pr.mu.Unlock()
			advance(10 * time.Second)
			got = cond(e.node(), v1.NodeMemoryPressure)
			assert.Equal(t, "KubeletHasInsufficientMemory", got.Reason, "the kubelet's with a new status")
		})
	})
	t.Run("Ready needs ephemeral-storage capacity, but a provider's capacity needs none", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := start(t, nodetest.New(), func(c *node.Config) { c.RootDir = "/nonexistent"; delete(c.Capacity, v1.ResourceEphemeralStorage) })
			advance(10 * time.Second)
			got := cond(e.node(), v1.NodeReady)
			assert.Equal(t, v1.ConditionFalse, got.Status)
			assert.Equal(t, "missing node capacity for resources: ephemeral-storage", got.Message)

			p := &fakeProvider{}
			e2 := start(t, nodetest.New(), func(c *node.Config) {
				c.NodeName, c.RootDir, c.Provider = "n1", "/nonexistent", p
				delete(c.Capacity, v1.ResourceEphemeralStorage)
			})
			p.mu.Lock()
			cb := p.cb
			p.mu.Unlock()
			cb(&v1.Node{Status: v1.NodeStatus{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("1Ti"), v1.ResourcePods: resource.MustParse("20")}}})
			advance(10 * time.Second)
			assert.Equal(t, v1.ConditionTrue, cond(e2.node(), v1.NodeReady).Status)
		})
	})
}

func TestProviderStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		p := &fakeProvider{}
		e := start(t, api, func(c *node.Config) { c.Provider = p })
		p.mu.Lock()
		cb := p.cb
		p.mu.Unlock()
		require.NotNil(t, cb, "NotifyNodeStatus called")
		cb(&v1.Node{Status: v1.NodeStatus{
			Capacity:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000"), v1.ResourceMemory: resource.MustParse("1Ti"), v1.ResourcePods: resource.MustParse("5000")},
			Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.7"}},
			Conditions: []v1.NodeCondition{{Type: "ProviderHealthy", Status: v1.ConditionTrue, Reason: "OK"}},
		}})
		synctest.Wait()
		assert.Equal(t, 1, statusUpdates(api), "the provider's change goes at once")
		n := e.node()
		cpu := n.Status.Capacity[v1.ResourceCPU]
		assert.Equal(t, int64(1000), cpu.Value())
		assert.Equal(t, "192.0.2.7", n.Status.Addresses[0].Address)
		assert.Equal(t, "OK", cond(n, "ProviderHealthy").Reason)
		assert.Equal(t, v1.ConditionTrue, cond(n, v1.NodeReady).Status)
	})
}

func TestSetterAdjustsAllocatable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		e := start(t, api, func(c *node.Config) {
			c.Setters = []node.Setter{func(_ context.Context, st *v1.NodeStatus) error {
				a := st.Allocatable.DeepCopy()
				a[v1.ResourceCPU] = resource.MustParse("3500m")
				st.Allocatable = a
				return nil
			}}
		})
		assert.Equal(t, "3500m", ptrQ(e.node().Status.Allocatable[v1.ResourceCPU]))
		advance(time.Minute)
		assert.Equal(t, 0, statusUpdates(api), "a steady setter is no change")
	})
}

// TestInitialNodeIsTheNodeRegistered: InitialNode, which admission checks
// pods against before registration, has the name, labels, taints,
// capacity, allocatable (after the Setters) and addresses of the Node the
// controller then registers.
func TestInitialNodeIsTheNodeRegistered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		rt, err := fake.New(fake.Config{})
		require.NoError(t, err)
		cfg := baseConfig(api, rt)
		cfg.Labels = map[string]string{"pool": "blue"}
		cfg.Taints = []v1.Taint{{Key: "example.com/registering", Effect: v1.TaintEffectNoExecute}}
		cfg.Allocatable = v1.ResourceList{v1.ResourceMemory: resource.MustParse("6Gi")}
		setterRuns := 0
		cfg.Setters = []node.Setter{func(_ context.Context, st *v1.NodeStatus) error {
			setterRuns++
			a := st.Allocatable.DeepCopy()
			a[v1.ResourceCPU] = resource.MustParse("3500m")
			st.Allocatable = a
			return nil
		}}
		ctl, err := node.New(cfg)
		require.NoError(t, err)
		initial := ctl.InitialNode(t.Context())
		assert.Equal(t, 1, setterRuns, "the Setters ran")
		assert.Nil(t, ctl.SharedNode(), "not registered by InitialNode")
		assert.Zero(t, api.Actions(), "no request")

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- ctl.Run(ctx) }()
		synctest.Wait()
		registered, ok := api.Node("n1")
		require.True(t, ok, "registered")
		assert.Equal(t, registered.Name, initial.Name)
		assert.Equal(t, registered.Labels, initial.Labels)
		assert.Equal(t, registered.Spec.Taints, initial.Spec.Taints)
		assert.Equal(t, registered.Status.Capacity, initial.Status.Capacity)
		assert.Equal(t, registered.Status.Allocatable, initial.Status.Allocatable)
		assert.Equal(t, registered.Status.Addresses, initial.Status.Addresses)
		cancel()
		require.NoError(t, <-done)
	})
}

func TestBadConfig(t *testing.T) {
	api := nodetest.New()
	cases := []struct {
		name string
		cfg  func(*node.Config)
		want string
	}{
		{"node name not a DNS subdomain", func(c *node.Config) { c.NodeName = "Bad_Name" }, "Bad_Name"},
		{"no node name", func(c *node.Config) { c.NodeName = "" }, "NodeName is required"},
		{"no client", func(c *node.Config) { c.Nodes = nil }, "Nodes is required"},
		{"negative capacity", func(c *node.Config) { c.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("-1")} }, "negative cpu -1"},
		{"negative allocatable", func(c *node.Config) { c.Allocatable = v1.ResourceList{v1.ResourceMemory: resource.MustParse("-1Gi")} }, "negative memory"},
		{"allocatable above capacity", func(c *node.Config) { c.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("5")} }, "above capacity"},
		{"negative MaxPods", func(c *node.Config) { c.MaxPods = -1 }, "negative MaxPods"},
		{"negative KubeletPort other than NoKubeletPort", func(c *node.Config) { c.KubeletPort = -2 }, "negative KubeletPort"},
		{"invalid label", func(c *node.Config) { c.Labels = map[string]string{"a b": "c"} }, "label a b=c"},
		{"hostname not a label value", func(c *node.Config) { c.Hostname = "a b" }, `Hostname "a b"`},
		{"health check without func", func(c *node.Config) { c.HealthChecks = []node.HealthCheck{{Name: "x"}} }, "health check"},
		{"negative PodsPerCore", func(c *node.Config) { c.PodsPerCore = -1 }, "negative PodsPerCore"},
		{"negative KubeReserved", func(c *node.Config) { c.KubeReserved = rlist("memory", "-1Mi") }, "negative memory"},
		{"hard eviction percentage above 100%", func(c *node.Config) {
			c.EvictionHard = []node.HardEviction{{Signal: node.SignalNodeFsAvailable, Percentage: 1.5}}
		}, "hard eviction threshold nodefs.available"},
		{"three node IPs", func(c *node.Config) { c.Addresses, c.NodeIPs = nil, []string{"10.0.0.1", "fd00::1", "10.0.0.2"} }, "want one IP or a dual-stack pair"},
		{"a pair of one family", func(c *node.Config) { c.Addresses, c.NodeIPs = nil, []string{"10.0.0.1", "10.0.0.2"} }, "one IPv4 and one IPv6"},
		{"node IP not an IP", func(c *node.Config) { c.Addresses, c.NodeIPs = nil, []string{"node-1"} }, `"node-1" is not an IP address`},
		{"multicast node IP", func(c *node.Config) { c.Addresses, c.NodeIPs = nil, []string{"224.0.0.1"} }, "can't be a multicast address"},
		{"link-local node IP", func(c *node.Config) { c.Addresses, c.NodeIPs = nil, []string{"fe80::1"} }, "can't be a link-local unicast address"},
		{"unspecified node IP in a pair", func(c *node.Config) { c.Addresses, c.NodeIPs = nil, []string{"0.0.0.0", "fd00::1"} }, "unspecified address only alone"},
		{"node IPs and addresses", func(c *node.Config) { c.NodeIPs = []string{"10.0.0.1"} }, "NodeIPs and Addresses are exclusive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(api, nil)
			tc.cfg(&cfg)
			_, err := node.New(cfg)
			require.ErrorIs(t, err, node.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestImages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		e := start(t, api, func(c *node.Config) { c.MaxImages = 2 })
		for _, img := range []string{"a:1", "b:1", "c:1"} {
			_, err := e.rt.PullImage(t.Context(), img, nil)
			require.NoError(t, err)
		}
		advance(10 * time.Second)
		assert.Empty(t, e.node().Status.Images, "the list read at registration is cached for ImageRefreshPeriod")
		advance(20 * time.Second)
		imgs := e.node().Status.Images
		require.Len(t, imgs, 2, "at most MaxImages")
		assert.True(t, strings.HasSuffix(imgs[0].Names[0], ":1"))
		advance(30 * time.Second)
		assert.Equal(t, 1, statusUpdates(api), "the same images are no change")
	})
}

// TestImageListIsCached: the status reads the runtime's images from a
// cache refreshed every ImageRefreshPeriod (30s), as the kubelet's image
// manager, not at every status computation (10s, and every 100ms until
// the node is first Ready).
func TestImageListIsCached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, nodetest.New(), nil)
		before := e.rt.CallCount("ListImages")
		advance(5 * time.Minute)
		assert.Equal(t, 10, e.rt.CallCount("ListImages")-before, "one read per 30s over 5m")

		e2 := start(t, nodetest.New(), func(c *node.Config) { c.NodeName, c.ImageRefreshPeriod = "n2", time.Minute })
		before = e2.rt.CallCount("ListImages")
		advance(5 * time.Minute)
		assert.Equal(t, 5, e2.rt.CallCount("ListImages")-before, "ImageRefreshPeriod sets the period")
	})
}

// TestMaxImages: how many images the status lists, as the kubelet's
// --node-status-max-images (default 50, -1 every image, 0 none).
func TestMaxImages(t *testing.T) {
	const kubeletDefault = 50
	const present = kubeletDefault + 10
	tests := []struct {
		name      string
		maxImages int
		noImages  bool
		// listedBefore: the Node exists with a list (an agent restarted
		// with another setting).
		listedBefore bool
		want         int
	}{
		{"zero lists the kubelet's default number", 0, false, false, kubeletDefault},
		{"a positive MaxImages caps the list", 7, false, false, 7},
		{"negative lists every image, as the kubelet's -1", -1, false, false, present},
		{"NoImages lists none, as the kubelet's 0", 0, true, false, 0},
		{"NoImages lists none whatever MaxImages says", -1, true, false, 0},
		{"NoImages clears the list the Node carried", 0, true, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var refs []string
				for i := range present {
					refs = append(refs, fmt.Sprintf("img-%02d:1", i))
				}
				rt, err := fake.New(fake.Config{Images: refs})
				require.NoError(t, err)
				api := nodetest.New()
				if tt.listedBefore {
					api.PutNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
						Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"old:1"}, SizeBytes: 1}}}})
				}
				e := start(t, api, func(c *node.Config) {
					c.Runtime = rt
					c.MaxImages, c.NoImages = tt.maxImages, tt.noImages
				})
				advance(30 * time.Second)
				assert.Len(t, e.node().Status.Images, tt.want)
				if tt.noImages {
					assert.Zero(t, rt.CallCount("ListImages"), "the runtime is not asked")
				}
			})
		})
	}
}

var _ node.LeaseClient = (*nodetest.LeaseClient)(nil)
var _ node.NodeClient = (*nodetest.NodeClient)(nil)
var _ = coordinationv1.Lease{}

func TestNotReadyAtStartTurnsReadyQuickly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		pleg := &health{err: errors.New("pleg has yet to be successful")}
		e := start(t, api, func(c *node.Config) {
			c.HealthChecks = []node.HealthCheck{{Name: "PLEG", Check: pleg.check}}
		})
		ready := cond(e.node(), v1.NodeReady)
		assert.Equal(t, "PLEG is not healthy: pleg has yet to be successful", ready.Message)
		advance(time.Second)
		assert.Equal(t, 0, statusUpdates(api), "no change, nothing sent")
		pleg.set(nil)
		advance(100 * time.Millisecond)
		assert.Equal(t, v1.ConditionTrue, cond(e.node(), v1.NodeReady).Status, "Ready within the fast period, not at the next 10s tick")
		api.ClearActions()
		advance(time.Hour + time.Second) // reports every 5m, counted from the Ready update
		assert.Equal(t, 12, statusUpdates(api), "back to the usual rhythm once Ready")
	})
}

func TestKubeletEndpointPort(t *testing.T) {
	for _, tc := range []struct {
		name string
		port int32
		want int32
	}{
		{"unset is the kubelet's 10250", 0, 10250},
		{"a port is reported as set", 10260, 10260},
		{"NoKubeletPort reports no endpoint", node.NoKubeletPort, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := start(t, nodetest.New(), func(c *node.Config) { c.KubeletPort = tc.port })
				assert.Equal(t, tc.want, e.node().Status.DaemonEndpoints.KubeletEndpoint.Port)
			})
		})
	}
}

// An extended resource a cluster operator advertises by patching the Node's
// status (kubectl patch --subresource=status) stays, as the kubelet keeps
// the capacity entries it does not set.
func TestOthersExtendedResourcesAreKept(t *testing.T) {
	dongle := v1.ResourceName("example.com/dongle")
	for _, tc := range []struct {
		name     string
		resource v1.ResourceName
		existing bool // on the Node before registration, rather than patched after
		provider bool
		kept     bool
	}{
		{name: "patched extended resource kept", resource: dongle, kept: true},
		{name: "extended resource of an existing node kept", resource: dongle, existing: true, kept: true},
		{name: "patched extended resource kept under a provider's capacity", resource: dongle, provider: true, kept: true},
		{name: "kubernetes.io resource not kept", resource: "kubernetes.io/foo"},
		{name: "native resource not kept", resource: "hugepages-2Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := nodetest.New()
				if tc.existing {
					api.PutNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
						Status: v1.NodeStatus{Capacity: v1.ResourceList{tc.resource: resource.MustParse("4")}}})
				}
				p := &fakeProvider{}
				e := start(t, api, func(c *node.Config) {
					if tc.provider {
						c.Provider = p
					}
				})
				if tc.provider {
					p.mu.Lock()
					cb := p.cb
					p.mu.Unlock()
					cb(&v1.Node{Status: v1.NodeStatus{Capacity: v1.ResourceList{
						v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("1Ti"), v1.ResourcePods: resource.MustParse("500")}}})
					synctest.Wait()
				}
				if !tc.existing {
					n := e.node()
					n.Status.Capacity = maps.Clone(n.Status.Capacity)
					n.Status.Capacity[tc.resource] = resource.MustParse("4")
					api.PutNode(n)
				}
				advance(5 * time.Minute) // the next report reads the Node again after the conflict
				n := e.node()
				c, inCap := n.Status.Capacity[tc.resource]
				a, inAlloc := n.Status.Allocatable[tc.resource]
				require.Equal(t, tc.kept, inCap, "in capacity: %v", n.Status.Capacity)
				require.Equal(t, tc.kept, inAlloc, "in allocatable: %v", n.Status.Allocatable)
				if tc.kept {
					assert.Equal(t, "4", c.String())
					assert.Equal(t, "4", a.String())
				}
				cpu := n.Status.Capacity[v1.ResourceCPU]
				want := "4"
				if tc.provider {
					want = "64"
				}
				assert.Equal(t, want, cpu.String(), "the controller's own capacity still set")
			})
		})
	}
}

// A status the apiserver refuses for good (forbidden, invalid) at every
// try of an update ends Run with the apiserver's reason, as its doc says,
// Lease or not; the Lease stops being renewed with it.
func TestRunReturnsWhenTheStatusIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leases bool
		err    error
		want   string
	}{
		{"forbidden with a lease", true, apierrors.NewForbidden(nodesGR, "n1", errors.New(`node "n2" is not allowed to modify node "n1"`)), "is not allowed to modify"},
		{"invalid with a lease", true, apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "n1",
			field.ErrorList{field.Invalid(field.NewPath("status", "capacity"), "-1", "must be greater than or equal to 0")}), "status.capacity"},
		{"forbidden without a lease", false, apierrors.NewForbidden(nodesGR, "n1", errors.New(`node "n2" is not allowed to modify node "n1"`)), "is not allowed to modify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := nodetest.New()
				pleg := &health{}
				e := start(t, api, func(c *node.Config) {
					c.HealthChecks = []node.HealthCheck{{Name: "PLEG", Check: pleg.check}}
					if !tc.leases {
						c.Leases = nil
					}
				})
				for range kubeletStatusTries { // all the tries of an update
					api.InjectError("nodes", nodetest.VerbUpdate, tc.err)
				}
				pleg.set(errors.New("stuck"))
				select {
				case err := <-e.done:
					e.cancel()
					e.cancel = nil
					require.Error(t, err)
					assert.Contains(t, err.Error(), `updating Node "n1"`)
					assert.Contains(t, err.Error(), tc.want)
				case <-time.After(time.Minute): // the bubble's clock
					t.Fatal("Run did not return after the status was refused")
				}
				renewals := leaseUpdates(api)
				advance(time.Minute)
				assert.Equal(t, renewals, leaseUpdates(api), "no renewal after Run returned")
				assert.Zero(t, api.Watches(), "no watch of the Node after Run returned")
			})
		})
	}
}
