package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/status/statustest"
)

func nodeReady(api *nodetest.Fake) (v1.NodeCondition, bool) {
	n, ok := api.Node("n1")
	if !ok {
		return v1.NodeCondition{}, false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c, true
		}
	}
	return v1.NodeCondition{}, false
}

func TestAgentRegistersNodeAndReportsReadiness(t *testing.T) {
	dir := t.TempDir()
	manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: static-web\nspec:\n  containers:\n  - name: web\n    image: nginx\n"
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	api := nodetest.New()
	pods := statustest.New()
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.Sources, c.StaticPodPath = nil, dir
	c.MaxPods = 7
	c.NodeIPs = []string{"192.0.2.10"}
	c.StatusClient = func(ns string) status.PodClient { return pods.Pods(ns) }
	c.Node = &node.Config{Nodes: api.Nodes(), Leases: api.Leases(), UpdateFrequency: 50 * time.Millisecond,
		LeaseDuration: 4 * time.Second}
	r := start(t, c)

	waitFor(t, "node Ready", func() bool {
		rc, ok := nodeReady(api)
		return ok && rc.Status == v1.ConditionTrue
	})
	n, _ := api.Node("n1")
	if q := n.Status.Capacity[v1.ResourcePods]; q.Value() != 7 {
		t.Errorf("pods capacity %s, want MaxPods 7", q.String())
	}
	if a := n.Status.Addresses; len(a) != 2 || a[0].Address != "192.0.2.10" || a[0].Type != v1.NodeInternalIP {
		t.Errorf("addresses %v, want InternalIP from NodeIPs first", a)
	}
	if r.a.Node() == nil {
		t.Fatal("Agent.Node is nil with Config.Node")
	}

	t.Run("mirror pods are owned by the registered Node", func(t *testing.T) {
		waitFor(t, "mirror pod", func() bool { _, ok := pods.Pod("default", "static-web-n1"); return ok })
		mp, _ := pods.Pod("default", "static-web-n1")
		if len(mp.OwnerReferences) != 1 || mp.OwnerReferences[0].UID != n.UID || mp.OwnerReferences[0].Kind != "Node" {
			t.Fatalf("mirror owner references %+v, want the Node %s", mp.OwnerReferences, n.UID)
		}
		if got := api.Count("nodes", nodetest.VerbGet, ""); got != 0 {
			t.Errorf("%d Node GETs; the owner comes from the registered Node", got)
		}
	})

	t.Run("runtime not ready makes the node NotReady with the runtime's reason", func(t *testing.T) {
		rt.SetCondition(runtime.RuntimeCondition{Type: runtime.RuntimeReady, Status: false, Reason: "Down", Message: "socket gone"})
		waitFor(t, "node NotReady", func() bool {
			rc, _ := nodeReady(api)
			return rc.Status == v1.ConditionFalse &&
				strings.Contains(rc.Message, "container runtime not ready: RuntimeReady=false reason:Down message:socket gone")
		})
		rt.SetCondition(runtime.RuntimeCondition{Type: runtime.RuntimeReady, Status: true})
		waitFor(t, "node Ready again", func() bool { rc, _ := nodeReady(api); return rc.Status == v1.ConditionTrue })
	})

	t.Run("the lease is renewed and stops with the agent", func(t *testing.T) {
		waitFor(t, "a lease renewal", func() bool { return api.Count("leases", nodetest.VerbUpdate, "") > 0 })
		r.stop()
		n := len(api.Actions())
		time.Sleep(1500 * time.Millisecond) // more than a renewal interval
		if got := len(api.Actions()); got != n {
			t.Fatalf("%d calls after the agent stopped", got-n)
		}
	})
}

func TestAgentStopsWhenTheNodeIsRefused(t *testing.T) {
	api := nodetest.New()
	api.InjectError("nodes", nodetest.VerbCreate, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1",
		errors.New(`User "system:node:n2" cannot create resource "nodes"`)))
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.Node = &node.Config{Nodes: api.Nodes()}
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = a.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), `cannot create resource "nodes"`) {
		t.Fatalf("Run = %v, want the apiserver's refusal", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run returned only when its context ended")
	}
}

func TestAgentNodeConfigErrors(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.Node = &node.Config{}
	if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Node without Nodes: %v, want ErrInvalidConfig", err)
	}
	c.Node = &node.Config{Nodes: nodetest.New().Nodes(), MaxImages: 1, Labels: map[string]string{"bad key": "x"}}
	if _, err := New(c); !errors.Is(err, node.ErrInvalidConfig) {
		t.Errorf("bad label: %v, want node.ErrInvalidConfig", err)
	}
}

// TestAdmissionBeforeRegistration: pods that arrive before the Node is
// registered (an apiserver that is not answering yet) are checked against
// the Node the agent would register, as the kubelet checks them against
// its initial node, without waiting for the registration.
func TestAdmissionBeforeRegistration(t *testing.T) {
	registering := v1.Taint{Key: "example.com/registering", Effect: v1.TaintEffectNoExecute}
	tolerant := func(p *v1.Pod) *v1.Pod {
		p.Spec.Tolerations = []v1.Toleration{{Key: registering.Key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
		return p
	}
	requesting := func(p *v1.Pod, cpu string) *v1.Pod {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		return p
	}
	selecting := func(p *v1.Pod, k, v string) *v1.Pod {
		p.Spec.NodeSelector = map[string]string{k: v}
		return p
	}
	// reserve is a Setter leaving half the cpu capacity allocatable.
	reserve := func(_ context.Context, st *v1.NodeStatus) error {
		alloc := st.Allocatable.DeepCopy()
		q := st.Capacity[v1.ResourceCPU]
		alloc[v1.ResourceCPU] = *resource.NewMilliQuantity(q.MilliValue()/2, resource.DecimalSI)
		st.Allocatable = alloc
		return nil
	}
	tests := []struct {
		name    string
		setters []node.Setter
		pod     *v1.Pod
		reason  string // "" runs
	}{
		{"a pod beyond the capacity is rejected", nil, tolerant(requesting(newPod("big", v1.RestartPolicyAlways, "c"), "3")), "OutOfcpu"},
		{"a pod beyond the allocatable the Setters leave is rejected", []node.Setter{reserve},
			tolerant(requesting(newPod("half", v1.RestartPolicyAlways, "c"), "1500m")), "OutOfcpu"},
		{"a pod not tolerating a registration taint is rejected", nil, newPod("intolerant", v1.RestartPolicyAlways, "c"), "TaintToleration"},
		{"a pod that fits runs", nil, tolerant(requesting(newPod("fits", v1.RestartPolicyAlways, "c"), "1")), ""},
		{"a pod selecting a label of the agent's runs", nil, tolerant(selecting(newPod("ours", v1.RestartPolicyAlways, "c"), "pool", "blue")), ""},
		{"a pod selecting a label the Node may have been given runs", nil,
			tolerant(selecting(newPod("theirs", v1.RestartPolicyAlways, "c"), "disk", "ssd")), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := nodetest.New()
			api.SetHook(func(_ context.Context, a nodetest.Action) error {
				if a.Resource == "nodes" {
					return apierrors.NewServiceUnavailable("apiserver starting")
				}
				return nil
			})
			rt, _ := fake.New(fake.Config{})
			c := fastConfig(rt)
			c.Node = &node.Config{Nodes: api.Nodes(), Leases: api.Leases(),
				Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")},
				Labels:   map[string]string{"pool": "blue"}, Taints: []v1.Taint{registering}, Setters: tt.setters}
			r := start(t, c)
			r.set(tt.pod)
			if tt.reason == "" {
				waitFor(t, "pod running", func() bool { return r.phase(tt.pod.UID) == v1.PodRunning })
			} else {
				waitFor(t, "pod failed", func() bool { return r.phase(tt.pod.UID) == v1.PodFailed })
				if got := r.pod(tt.pod.UID).Status; got.Reason != tt.reason {
					t.Fatalf("reason %q (%s), want %q", got.Reason, got.Message, tt.reason)
				}
			}
			if r.a.Node().SharedNode() != nil {
				t.Fatal("the Node was registered: the test is not about admission before registration")
			}
		})
	}
}

// TestAdmissionSeesOthersChangesToTheNode: a label or taint another writer
// gives the registered Node (kubectl label, the node lifecycle
// controller's taints) is in the Node admission checks pods against as
// soon as the Node's watch delivers it, as in the kubelet's node informer,
// not with the agent's next status update: a pod scheduled onto a label
// just added is not rejected with NodeAffinity.
func TestAdmissionSeesOthersChangesToTheNode(t *testing.T) {
	notReady := v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute}
	tests := []struct {
		name   string
		change func(*v1.Node)
		seen   func(*v1.Node) bool
		pod    *v1.Pod
		reason string // "" runs
	}{
		{
			name:   "a pod selecting a label another writer added runs",
			change: func(n *v1.Node) { n.Labels["disk"] = "ssd" },
			seen:   func(n *v1.Node) bool { return n.Labels["disk"] == "ssd" },
			pod: func() *v1.Pod {
				p := newPod("ssd", v1.RestartPolicyAlways, "c")
				p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
				return p
			}(),
		},
		{
			name:   "a pod not tolerating a NoExecute taint another writer added is rejected",
			change: func(n *v1.Node) { n.Spec.Taints = append(n.Spec.Taints, notReady) },
			seen:   func(n *v1.Node) bool { return len(n.Spec.Taints) > 0 },
			pod:    newPod("intolerant", v1.RestartPolicyAlways, "c"),
			reason: "TaintToleration",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := nodetest.New()
			rt, _ := fake.New(fake.Config{})
			c := fastConfig(rt)
			c.Node = &node.Config{Nodes: api.Nodes(), Leases: api.Leases()}
			r := start(t, c)
			waitFor(t, "node Ready", func() bool {
				rc, ok := nodeReady(api)
				return ok && rc.Status == v1.ConditionTrue && r.a.Node().SharedNode() != nil
			})
			n, _ := api.Node("n1")
			tt.change(n)
			updates := api.Count("nodes", nodetest.VerbUpdate, "status")
			api.PutNode(n)
			waitFor(t, "the change in the agent's Node", func() bool { return tt.seen(r.a.Node().SharedNode()) })
			if got := api.Count("nodes", nodetest.VerbUpdate, "status"); got != updates {
				t.Fatalf("%d status updates since the change; the test is about the watch", got-updates)
			}
			r.set(tt.pod)
			if tt.reason == "" {
				waitFor(t, "pod running", func() bool { return r.phase(tt.pod.UID) == v1.PodRunning })
				return
			}
			waitFor(t, "pod failed", func() bool { return r.phase(tt.pod.UID) == v1.PodFailed })
			if got := r.pod(tt.pod.UID).Status; got.Reason != tt.reason {
				t.Fatalf("reason %q (%s), want %q", got.Reason, got.Message, tt.reason)
			}
		})
	}
}

// TestCriticalPodPreemptsPods: with a Node, a critical pod (priority
// system-cluster-critical or more, or static) beyond the node's pods
// capacity stops another pod to run, as the kubelet's
// CriticalPodAdmissionHandler; the preempted pod ends Failed with reason
// Preempting and a DisruptionTarget condition. A pod that is not critical
// is refused.
func TestCriticalPodPreemptsPods(t *testing.T) {
	for _, tc := range []struct {
		name     string
		priority int32
		preempts bool
	}{
		{"a critical pod preempts", 2000001000, true},
		{"a pod that is not critical is refused", 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, _ := fake.New(fake.Config{})
			c := fastConfig(rt)
			c.MaxPods = 1
			api := nodetest.New()
			c.Node = &node.Config{Nodes: api.Nodes(), Leases: api.Leases()}
			r := start(t, c)
			waitFor(t, "the Node registered", func() bool { return r.a.Node().SharedNode() != nil })
			first := newPod("first", v1.RestartPolicyAlways, "c")
			r.set(first)
			waitFor(t, "first pod running", func() bool { return r.phase(first.UID) == v1.PodRunning })

			pod := newPod("second", v1.RestartPolicyAlways, "c")
			pod.Spec.Priority = &tc.priority
			r.set(first, pod)
			if !tc.preempts {
				waitFor(t, "pod refused", func() bool { return r.phase(pod.UID) == v1.PodFailed })
				if got := r.pod(pod.UID).Status.Reason; got != ReasonOutOfPods {
					t.Fatalf("refused with %q, want %q", got, ReasonOutOfPods)
				}
				if r.phase(first.UID) != v1.PodRunning {
					t.Fatalf("first pod %v, want it left running", r.phase(first.UID))
				}
				return
			}
			waitFor(t, "critical pod running", func() bool { return r.phase(pod.UID) == v1.PodRunning })
			st := r.pod(first.UID).Status
			if st.Phase != v1.PodFailed || st.Reason != "Preempting" {
				t.Fatalf("first pod %s %q, want Failed Preempting", st.Phase, st.Reason)
			}
			disrupted := false
			for _, cond := range st.Conditions {
				disrupted = disrupted || (cond.Type == v1.DisruptionTarget && cond.Status == v1.ConditionTrue && cond.Reason == "TerminationByKubelet")
			}
			if !disrupted {
				t.Fatalf("first pod has no DisruptionTarget condition: %+v", st.Conditions)
			}
			running, err := rt.GetPods(context.Background(), false)
			if err != nil || len(running) != 1 || running[0].ID != pod.UID {
				t.Fatalf("running on the runtime: %d pods (%v), want the critical pod only", len(running), err)
			}
		})
	}
}
