package sim_test

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/sim"
)

const (
	marking    = "event Normal TaintManagerEviction (taint-eviction-controller): Marking for deletion Pod default/p"
	cancelling = "event Normal TaintManagerEviction (taint-eviction-controller): Cancelling deletion of Pod default/p"
)

// firstAt returns when the log first has what for the object.
func firstAt(cl *sim.Cluster, object, what string) (time.Time, bool) {
	for _, e := range cl.Events() {
		if e.Object == object && e.What == what {
			return e.Time, true
		}
	}
	return time.Time{}, false
}

func tolerate(key string, seconds *int64) v1.Toleration {
	return v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: seconds}
}

func taintNode(t *testing.T, cl *sim.Cluster, name string, taint v1.Taint) {
	t.Helper()
	ctx := context.Background()
	n, err := cl.Store().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, taint)
	if _, err := cl.Store().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The taint eviction controller on the node lifecycle controller's taints
// and on others: pod p on n1 (the apiserver gives it 300s tolerations of
// not-ready and unreachable unless it has its own), n2 stays up.
func TestTaintEviction(t *testing.T) {
	custom := v1.Taint{Key: "dedicated", Value: "db", Effect: v1.TaintEffectNoExecute}
	tests := []struct {
		name        string
		tolerations []v1.Toleration
		// fail acts on n1 10s after p was created; then the cluster runs an
		// hour.
		fail func(t *testing.T, cl *sim.Cluster)
		// taint is the log line of the taint that counts.
		taint string
		// evict is when p is marked for deletion after taint; -1 never.
		evict time.Duration
		// after is p once evicted: "gone" (its agent stopped and deleted
		// it), "terminating" (its node is gone: it stays), "" not checked.
		after string
	}{
		{"a pod with the default toleration is evicted 300s after its node is tainted unreachable", nil,
			stopNode, unreachable, 300 * time.Second, "terminating"},
		{"a pod tolerating unreachable for 0s is evicted as soon as its node is tainted", []v1.Toleration{tolerate(v1.TaintNodeUnreachable, ptr.To[int64](0))},
			stopNode, unreachable, 0, "terminating"},
		{"the first toleration matching the taint counts, not a shorter one after it", []v1.Toleration{tolerate(v1.TaintNodeUnreachable, ptr.To[int64](600)), tolerate("", ptr.To[int64](60))},
			stopNode, unreachable, 600 * time.Second, "terminating"},
		{"a pod tolerating unreachable forever stays", []v1.Toleration{tolerate(v1.TaintNodeUnreachable, nil)},
			stopNode, unreachable, -1, ""},
		// The agent stops the pod, as the kubelet: a network not ready
		// holds back only the starts of pods on the pod network.
		{"a pod on a node reporting NotReady is evicted after its not-ready toleration, and stopped",
			[]v1.Toleration{tolerate(v1.TaintNodeNotReady, ptr.To[int64](120))},
			func(t *testing.T, cl *sim.Cluster) { networkDown("n1")(t, cl) }, notReady, 120 * time.Second, "gone"},
		{"a pod not tolerating a taint someone adds is evicted at once", nil,
			func(t *testing.T, cl *sim.Cluster) { taintNode(t, cl, "n1", custom) }, "tainted dedicated=db:NoExecute", 0, "gone"},
		{"a pod tolerating a taint someone adds stays", []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "db"}},
			func(t *testing.T, cl *sim.Cluster) { taintNode(t, cl, "n1", custom) }, "tainted dedicated=db:NoExecute", -1, ""},
		{"a node back before the deadline keeps its pods", nil,
			func(t *testing.T, cl *sim.Cluster) {
				stopNode(t, cl)
				run(t, cl, 2*time.Minute)
				if err := cl.Node("n1").Start(); err != nil {
					t.Fatal(err)
				}
			}, unreachable, -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, sim.Config{}, "n1", "n2")
			run(t, cl, time.Second)
			p := pod("p", nil)
			p.Spec.NodeName = "n1"
			p.Spec.Tolerations = tt.tolerations
			create(t, cl, p)
			run(t, cl, 10*time.Second)
			if got := get(t, cl, "p"); !podReady(got) {
				t.Fatalf("p not Ready before the failure: %+v", got.Status)
			}
			tt.fail(t, cl)
			run(t, cl, time.Hour)

			tainted, ok := firstAt(cl, "n1", tt.taint)
			if !ok {
				t.Fatalf("n1 never %s: %v", tt.taint, cl.Events())
			}
			marked, evicted := firstAt(cl, "default/p", marking)
			deleting, _ := firstAt(cl, "default/p", "deleting")
			switch {
			case tt.evict < 0 && evicted:
				t.Fatalf("p marked for deletion %v after the taint, want never", marked.Sub(tainted))
			case tt.evict < 0:
				got := get(t, cl, "p")
				if got.DeletionTimestamp != nil || got.Status.Phase != v1.PodRunning || got.Status.ContainerStatuses[0].RestartCount != 0 {
					t.Fatalf("p after an hour: deletionTimestamp %v, %s, %+v", got.DeletionTimestamp, got.Status.Phase, got.Status.ContainerStatuses)
				}
				return
			case !evicted:
				t.Fatalf("p never marked for deletion, want %v after the taint: %v", tt.evict, cl.Events())
			case marked.Sub(tainted) != tt.evict || !deleting.Equal(marked):
				t.Fatalf("p marked for deletion %v and deleting %v after the taint, want both %v", marked.Sub(tainted), deleting.Sub(tainted), tt.evict)
			}
			evs, err := cl.Store().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=TaintManagerEviction,source=" + sim.TaintEvictionController})
			if err != nil || len(evs.Items) == 0 || evs.Items[0].Message != "Marking for deletion Pod default/p" || evs.Items[0].InvolvedObject.Name != "p" {
				t.Errorf("the store's TaintManagerEviction Events: %+v, %v", evs, err)
			}
			got, err := cl.Pod("default", "p")
			switch tt.after {
			case "gone":
				if err == nil {
					t.Fatalf("p still stored an hour after its eviction: %+v", got.ObjectMeta)
				}
				return
			case "":
				return
			}
			if err != nil {
				t.Fatalf("p of a node that is gone was deleted, want it Terminating: %v", err)
			}
			if got.DeletionTimestamp == nil || !hasCondition(got, v1.DisruptionTarget, "DeletionByTaintManager") {
				t.Fatalf("p: deletionTimestamp %v, conditions %+v; want Terminating, DisruptionTarget", got.DeletionTimestamp, got.Status.Conditions)
			}
		})
	}
}

func stopNode(_ *testing.T, cl *sim.Cluster) { cl.Node("n1").Stop() }

func hasCondition(p *v1.Pod, typ v1.PodConditionType, reason string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status == v1.ConditionTrue && c.Reason == reason
		}
	}
	return false
}

// An eviction cancelled by the node's return is in the log, at the
// instant the taint went.
func TestCancelledEvictionIsLogged(t *testing.T) {
	cl := newCluster(t, sim.Config{}, "n1", "n2")
	run(t, cl, time.Second)
	p := pod("p", nil)
	p.Spec.NodeName = "n1"
	create(t, cl, p)
	run(t, cl, 10*time.Second)
	cl.Node("n1").Stop()
	run(t, cl, 2*time.Minute)
	if err := cl.Node("n1").Start(); err != nil {
		t.Fatal(err)
	}
	run(t, cl, time.Minute)
	untainted, ok := firstAt(cl, "n1", unreachableUn)
	if !ok {
		t.Fatalf("n1 never untainted: %v", cl.Events())
	}
	if at, ok := firstAt(cl, "default/p", cancelling); !ok || !at.Equal(untainted) {
		t.Fatalf("cancellation logged %v (%v), want at the untainting %v", at, ok, untainted)
	}
}

// Config.NoTaintEviction leaves pods on tainted Nodes to the test.
func TestNoTaintEvictionLeavesPods(t *testing.T) {
	cl := newCluster(t, sim.Config{NoTaintEviction: true}, "n1", "n2")
	run(t, cl, time.Second)
	p := pod("p", nil)
	p.Spec.NodeName = "n1"
	create(t, cl, p)
	run(t, cl, 10*time.Second)
	taintNode(t, cl, "n1", v1.Taint{Key: "dedicated", Effect: v1.TaintEffectNoExecute})
	run(t, cl, time.Hour)
	if got := get(t, cl, "p"); got.DeletionTimestamp != nil || got.Status.Phase != v1.PodRunning {
		t.Fatalf("p deleted with eviction off: %v, %s", got.DeletionTimestamp, got.Status.Phase)
	}
}

// A pod and its node's taint seen in the same instant (the pod created as
// the node is tainted) schedule one eviction: none is cancelled, as on a
// real clock the pod's second look comes later than the first.
func TestAnEvictionSeenTwiceInOneInstantStands(t *testing.T) {
	cl := newCluster(t, sim.Config{}, "n1", "n2")
	run(t, cl, time.Second)
	p := pod("p", nil)
	p.Spec.NodeName = "n1"
	p.Spec.Tolerations = []v1.Toleration{tolerate("dedicated", ptr.To[int64](60))}
	taintNode(t, cl, "n1", v1.Taint{Key: "dedicated", Effect: v1.TaintEffectNoExecute})
	create(t, cl, p)
	start := cl.Clock().Now()
	run(t, cl, 2*time.Minute)
	if at, ok := firstAt(cl, "default/p", cancelling); ok {
		t.Errorf("eviction cancelled at %v", at.Sub(start))
	}
	if at, ok := firstAt(cl, "default/p", marking); !ok || at.Sub(start) != time.Minute {
		t.Errorf("p marked for deletion %v after the taint (%v), want 1m0s", at.Sub(start), ok)
	}
}
