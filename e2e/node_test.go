package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/status"
)

// client-go's typed clients are node's clients as they are, and its
// Nodes can be watched.
var (
	_ node.NodeClient  = typedcorev1.NodeInterface(nil)
	_ node.NodeWatcher = typedcorev1.NodeInterface(nil)
	_ node.LeaseClient = typedcoordinationv1.LeaseInterface(nil)
)

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// waitNode polls the Node until check returns "", and returns it.
func waitNode(t *testing.T, cs *kubernetes.Clientset, name string, timeout time.Duration, check func(*corev1.Node) string) *corev1.Node {
	t.Helper()
	var got *corev1.Node
	last := "not polled"
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = "not found"
			return false, nil
		}
		if err != nil {
			return false, err
		}
		got, last = n, check(n)
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("node %s: %v; last: %s", name, err, last)
	}
	return got
}

func readyIs(want corev1.ConditionStatus, msg string) func(*corev1.Node) string {
	return func(n *corev1.Node) string {
		c := nodeCondition(n, corev1.NodeReady)
		if c == nil || c.Status != want || !strings.Contains(c.Message, msg) {
			return fmt.Sprintf("Ready is %+v, want %s with %q", c, want, msg)
		}
		return ""
	}
}

// leaseRenewals waits for n renewals of the node's Lease after the current
// one and returns the renew times seen, the current one first.
func leaseRenewals(t *testing.T, cs *kubernetes.Clientset, name string, n int) []time.Time {
	t.Helper()
	var seen []time.Time
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Duration(n+1)*15*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if l.Spec.RenewTime == nil {
			return false, fmt.Errorf("lease without renewTime: %+v", l.Spec)
		}
		if rt := l.Spec.RenewTime.Time; len(seen) == 0 || !rt.Equal(seen[len(seen)-1]) {
			seen = append(seen, rt)
		}
		return len(seen) > n, nil
	})
	if err != nil {
		t.Fatalf("lease %s: %d renewals seen (%v): %v", name, len(seen)-1, seen, err)
	}
	return seen
}

func getLease(t *testing.T, cs *kubernetes.Clientset, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNodeJoinsAndStaysReady(t *testing.T) {
	c := startCluster(t)
	cs, _ := clientset(t, c.RESTConfig(), 50, 100)
	ctx := t.Context()
	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		NodeName:           "joined",
		Runtime:            rt,
		PodSource:          cs.CoreV1().Pods(""),
		StatusClient:       func(ns string) status.PodClient { return cs.CoreV1().Pods(ns) },
		NodeIPs:            []string{"127.0.0.1"},
		MaxPods:            30,
		RelistPeriod:       200 * time.Millisecond,
		RuntimeCheckPeriod: 200 * time.Millisecond,
		Node: &node.Config{
			Nodes:          cs.CoreV1().Nodes(),
			Leases:         cs.CoordinationV1().Leases(corev1.NamespaceNodeLease),
			Labels:         map[string]string{"pool": "e2e"},
			Taints:         []corev1.Taint{{Key: "nodekit.io/e2e", Effect: corev1.TaintEffectPreferNoSchedule}},
			KubeletVersion: "v1.37.0-nodekit",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(actx) }()
	stopAgent := func() {
		if stop != nil {
			stop()
			stop = nil
			if err := <-done; err != nil {
				t.Errorf("agent.Run: %v", err)
			}
		}
	}
	t.Cleanup(stopAgent)

	n := waitNode(t, cs, "joined", 30*time.Second, readyIs(corev1.ConditionTrue, "kubelet is posting ready status"))
	t.Run("the apiserver accepted the Node as registered", func(t *testing.T) {
		if q := n.Status.Capacity[corev1.ResourcePods]; q.Value() != 30 {
			t.Errorf("pods capacity %s, want MaxPods 30", q.String())
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := n.Status.Allocatable[r]; !ok || q.Sign() <= 0 {
				t.Errorf("allocatable %s = %v, want positive", r, n.Status.Allocatable)
			}
		}
		if n.Labels["pool"] != "e2e" || n.Labels[corev1.LabelHostname] != "joined" || n.Labels[corev1.LabelOSStable] == "" {
			t.Errorf("labels %v", n.Labels)
		}
		// Admission (TaintNodesByCondition) adds not-ready at creation; the
		// node lifecycle controller, not run here, would lift it.
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "nodekit.io/e2e" }) {
			t.Errorf("taints %v, want the registered one among them", n.Spec.Taints)
		}
		if n.Status.NodeInfo.ContainerRuntimeVersion != "fake://0.1.0" || n.Status.NodeInfo.KubeletVersion != "v1.37.0-nodekit" {
			t.Errorf("nodeInfo %+v", n.Status.NodeInfo)
		}
		if n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
			t.Errorf("kubelet port %d", n.Status.DaemonEndpoints.KubeletEndpoint.Port)
		}
		if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Address != "127.0.0.1" {
			t.Errorf("addresses %v", n.Status.Addresses)
		}
		for _, typ := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
			if c := nodeCondition(n, typ); c == nil || c.Status != corev1.ConditionFalse {
				t.Errorf("%s is %+v, want False", typ, c)
			}
		}
	})

	t.Run("a pod bound to the node runs and its status reaches the apiserver", func(t *testing.T) {
		p := testPod("on-joined", "joined")
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPod(t, cs, "default", "on-joined", func(p *corev1.Pod) string { return checkRunning(p, "") })
	})

	t.Run("the lease is renewed every 10s", func(t *testing.T) {
		l := getLease(t, cs, "joined")
		if *l.Spec.HolderIdentity != "joined" || *l.Spec.LeaseDurationSeconds != 40 {
			t.Errorf("lease spec %+v", l.Spec)
		}
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != n.UID {
			t.Errorf("lease owners %+v, want the Node %s", l.OwnerReferences, n.UID)
		}
		seen := leaseRenewals(t, cs, "joined", 2)
		for i := 1; i < len(seen); i++ {
			// The first renewal seen may follow a read that caught the
			// lease mid-interval; the one after is a whole interval.
			if d := seen[i].Sub(seen[i-1]); i == 2 && (d < 9*time.Second || d > 12*time.Second) {
				t.Errorf("renewal interval %v, want ~10s", d)
			}
		}
	})

	t.Run("the node goes NotReady with the runtime's message when the runtime is not ready", func(t *testing.T) {
		rt.SetCondition(runtime.RuntimeCondition{Type: runtime.RuntimeReady, Status: false, Reason: "ContainerdDown", Message: "connection refused"})
		waitNode(t, cs, "joined", 15*time.Second, readyIs(corev1.ConditionFalse,
			"container runtime not ready: RuntimeReady=false reason:ContainerdDown message:connection refused"))
		rt.SetCondition(runtime.RuntimeCondition{Type: runtime.RuntimeReady, Status: true})
		got := waitNode(t, cs, "joined", 15*time.Second, readyIs(corev1.ConditionTrue, ""))
		if c := nodeCondition(got, corev1.NodeReady); c.Reason != "KubeletReady" {
			t.Errorf("Ready reason %q", c.Reason)
		}
	})

	t.Run("a label another client adds is in the agent's Node at once, and a pod selecting it runs", func(t *testing.T) {
		patch := []byte(`{"metadata":{"labels":{"disk":"ssd"}}}`)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, "joined", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// Well within the 5m of an unchanged status's update: the watch.
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return a.Node().SharedNode().Labels["disk"] == "ssd", nil
		})
		if err != nil {
			t.Fatalf("the label is not in the agent's Node after 5s: %v", err)
		}
		p := testPod("on-ssd", "joined")
		p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPod(t, cs, "default", "on-ssd", func(p *corev1.Pod) string { return checkRunning(p, "") })
	})

	t.Run("the lease stops advancing when the agent stops", func(t *testing.T) {
		stopAgent()
		before := getLease(t, cs, "joined").Spec.RenewTime.Time
		time.Sleep(12 * time.Second)
		if after := getLease(t, cs, "joined").Spec.RenewTime.Time; !after.Equal(before) {
			t.Fatalf("renewTime moved from %v to %v after the agent stopped", before, after)
		}
	})
}
