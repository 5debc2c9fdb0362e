package sim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/sim"
)

// The scenario of the node-pressure tests, on n1 (16Gi): three BestEffort
// replicas of 512Mi each and a Guaranteed pod (15Gi requested) whose
// working set grows from 12Gi by 10Mi/s, so memory.available falls below
// 1Gi 153.6s after the hog started; n2 holds four small pods, so the
// scheduler, balancing pod counts, would pick n1 but for its pressure.
const (
	growth      = 10 << 20 // the hog's bytes per second
	hogStart    = 12 << 30
	beUsage     = 512 << 20
	beReplicas  = 3
	nodeMemory  = 16 << 30
	thresholdGi = 1
)

// crossing is how long after the hog started memory.available goes below
// the threshold with the three BestEffort pods running.
var crossing = time.Duration(float64(nodeMemory-hogStart-beReplicas*beUsage-thresholdGi<<30) / growth * float64(time.Second))

func thresholds(t *testing.T, hard, soft, grace, reclaim string) []eviction.Threshold {
	t.Helper()
	m := func(s string) map[string]string {
		out, err := eviction.ParseMap(s, "<")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	eq := func(s string) map[string]string {
		out, err := eviction.ParseMap(s, "=")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ts, err := eviction.ParseThresholdConfig(false, m(hard), m(soft), eq(grace), eq(reclaim))
	if err != nil {
		t.Fatal(err)
	}
	if ts == nil {
		ts = []eviction.Threshold{} // none, not the defaults
	}
	return ts
}

// pressureTrace is what a run of the scenario showed, relative to the
// hog's start.
type pressureTrace struct {
	pressure []time.Duration // n1's MemoryPressure True
	evicted  []time.Duration // the Evicted events, in order
	cleared  time.Duration   // n1's MemoryPressure False; 0 never
}

func (p pressureTrace) String() string {
	return fmt.Sprintf("pressure %v, evictions %v, cleared %v", p.pressure, p.evicted, p.cleared)
}

// Memory pressure on one sim node: the eviction manager over the node's
// scripted stats evicts its BestEffort pods on virtual time (Failed,
// Evicted, the kubelet's message), the Node reports MemoryPressure, the
// scheduler keeps BestEffort pods off it, and a ReplicaSet-like
// controller's replacements run on the other node.
func TestNodeMemoryPressureEvictsBestEffortPods(t *testing.T) {
	tests := []struct {
		name                       string
		hard, soft, grace, reclaim string
		// first bounds the first eviction after the crossing; spread
		// bounds the time from the first eviction to the last. evict
		// false: nothing is evicted, no pressure.
		firstMin, firstMax, spreadMin, spreadMax time.Duration
		evict                                    bool
	}{
		{name: "a hard threshold evicts a BestEffort pod each time the growing pod takes the node below it",
			hard: "memory.available<1Gi", firstMax: 10 * time.Second,
			// Each eviction gives 512Mi back, which the hog takes in 51.2s.
			spreadMin: 2 * 51 * time.Second, spreadMax: 2*51*time.Second + 25*time.Second, evict: true},
		{name: "with a minimum reclaim the BestEffort pods go one pass after another",
			hard: "memory.available<1Gi", reclaim: "memory.available=1Gi", firstMax: 10 * time.Second,
			spreadMax: 30 * time.Second, evict: true},
		{name: "a soft threshold evicts once met for its grace period",
			soft: "memory.available<1Gi", grace: "memory.available=30s", reclaim: "memory.available=1Gi",
			firstMin: 30 * time.Second, firstMax: 40 * time.Second, spreadMax: 30 * time.Second, evict: true},
		{name: "without thresholds the node reports no pressure and evicts nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := thresholds(t, tt.hard, tt.soft, tt.grace, tt.reclaim)
			tr := runPressure(t, ts, tt.evict)
			t.Logf("crossing at %v after the hog started: %v", crossing, tr)
			if !tt.evict {
				if len(tr.evicted) != 0 || len(tr.pressure) != 0 {
					t.Errorf("without thresholds: %v, want nothing", tr)
				}
				return
			}
			if len(tr.evicted) != beReplicas {
				t.Fatalf("%d evictions, want the %d BestEffort pods: %v", len(tr.evicted), beReplicas, tr)
			}
			if d := tr.evicted[0] - crossing; d < tt.firstMin || d > tt.firstMax {
				t.Errorf("first eviction %v after the crossing, want %v to %v", d, tt.firstMin, tt.firstMax)
			}
			if d := tr.evicted[len(tr.evicted)-1] - tr.evicted[0]; d < tt.spreadMin || d > tt.spreadMax {
				t.Errorf("evictions spread over %v, want %v to %v", d, tt.spreadMin, tt.spreadMax)
			}
			// The Node reports the pressure from the pass that saw it
			// (its next status update, within 10s) and clears it the
			// transition period (5m) after the hog levelled off.
			if len(tr.pressure) != 1 || tr.pressure[0] < crossing || tr.pressure[0] > tr.evicted[0]+10*time.Second {
				t.Errorf("MemoryPressure True at %v, want once, between the crossing and 10s after the first eviction", tr.pressure)
			}
			if tr.cleared < tr.evicted[len(tr.evicted)-1]+5*time.Minute {
				t.Errorf("MemoryPressure cleared at %v, want at least 5m after the last eviction", tr.cleared)
			}
		})
	}
}

// A run is reproducible: the same seed evicts the same pods at the same
// virtual times. (When the Node shows the pressure is not: a pass of the
// eviction manager and a status update of the node in the same instant
// run in either order, so the condition shows then or 10s later.)
func TestNodeMemoryPressureIsDeterministic(t *testing.T) {
	ts := thresholds(t, "memory.available<1Gi", "", "", "")
	a, b := runPressure(t, ts, true), runPressure(t, ts, true)
	if fmt.Sprint(a.evicted) != fmt.Sprint(b.evicted) {
		t.Errorf("two runs of seed 7 differ:\n%v\n%v", a, b)
	}
}

func guaranteed(cpu, mem string) v1.ResourceRequirements {
	l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	return v1.ResourceRequirements{Requests: l, Limits: l}
}

func nodeCondition(t *testing.T, cl *sim.Cluster, name string, ct v1.NodeConditionType) v1.ConditionStatus {
	t.Helper()
	n, err := cl.Store().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == ct {
			return c.Status
		}
	}
	return ""
}

// runPressure runs the scenario with ts on both nodes: until the
// BestEffort pods on n1 are evicted and replaced on n2 (evict), then the
// hog levels off and the cluster runs until n1's pressure clears; or,
// without evict, for two minutes past the crossing.
func runPressure(t *testing.T, ts []eviction.Threshold, evict bool) pressureTrace {
	t.Helper()
	cl := newCluster(t, sim.Config{Seed: 7, Eviction: func(string) *eviction.Config {
		return &eviction.Config{Thresholds: ts}
	}}, "n1")
	ctx, cancel := context.WithCancel(context.Background())
	rs := &replicaSet{Name: "be", Replicas: beReplicas, Pods: cl.Pods("default"), KeepFailed: true,
		Ann:      map[string]string{sim.MemoryAnnotation: "512Mi"},
		Template: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "be:1"}}}}
	done := make(chan error, 1)
	go func() { done <- rs.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	hog := pod("hog", map[string]string{sim.MemoryAnnotation: fmt.Sprintf("%d+%d/s", hogStart, growth)})
	hog.Spec.NodeName = "n1"
	hog.Spec.Containers[0].Resources = guaranteed("1", "15Gi")
	create(t, cl, hog)
	running := func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }
	onNode := func(node string, ok func(*v1.Pod) bool) int {
		k := 0
		for _, p := range cl.ListPods() {
			if p.Spec.NodeName == node && p.Labels["app"] == "be" && ok(p) {
				k++
			}
		}
		return k
	}
	if err := cl.RunUntil(ctx, time.Minute, func() bool {
		p, err := cl.Pod("default", "hog")
		return err == nil && running(p) && onNode("n1", running) == beReplicas
	}); err != nil {
		t.Fatalf("hog and BestEffort pods not running on n1: %v", err)
	}
	p, _ := cl.Pod("default", "hog")
	hogStarted := p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	if _, err := cl.AddNode("n2"); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		f := pod(fmt.Sprintf("filler-%d", i), nil)
		f.Spec.NodeName = "n2"
		f.Spec.Containers[0].Resources = guaranteed("100m", "64Mi")
		create(t, cl, f)
	}

	failed := func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted" }
	evicted := func(p *v1.Pod) bool { return failed(p) && strings.HasPrefix(p.Status.Message, lowOnMemory) }
	if !evict {
		if err := cl.RunFor(ctx, crossing+2*time.Minute-cl.Clock().Since(hogStarted)); err != nil {
			t.Fatal(err)
		}
		if p, _ := cl.Pod("default", "hog"); !running(p) {
			t.Errorf("hog %s, want Running", p.Status.Phase)
		}
		if s := nodeCondition(t, cl, "n1", v1.NodeMemoryPressure); s != v1.ConditionFalse {
			t.Errorf("n1 MemoryPressure %q, want False", s)
		}
		return trace(cl, hogStarted)
	}
	if err := cl.RunUntil(ctx, 10*time.Minute, func() bool {
		// The Node shows the pressure with its next status, within 10s.
		return onNode("n1", evicted) == beReplicas && onNode("n2", running) == beReplicas &&
			nodeCondition(t, cl, "n1", v1.NodeMemoryPressure) == v1.ConditionTrue
	}); err != nil {
		t.Fatalf("BestEffort pods not evicted from n1 and replaced on n2: %v; %d evicted, %d running on n2",
			err, onNode("n1", evicted), onNode("n2", running))
	}
	for _, p := range cl.ListPods() {
		if p.Spec.NodeName != "n1" || p.Labels["app"] != "be" {
			continue
		}
		// A replacement the scheduler bound to n1 before its Node showed
		// the pressure (the agent reports it with its next status, within
		// 10s, as the kubelet) is refused by admission, as the kubelet's.
		if failed(p) && p.Status.Message == "Pod was rejected: The node had condition: [MemoryPressure]. " {
			continue
		}
		// The kubelet's message: the threshold, what is available, and
		// the container's usage against its request.
		if !evicted(p) || !strings.Contains(p.Status.Message, "Container app was using 512Mi, request is 0, has larger consumption of memory. ") {
			t.Errorf("%s on n1: %s %s %q, want Failed, Evicted, the kubelet's message", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		if !hasCondition(p, v1.DisruptionTarget, eviction.ReasonTerminationByKubelet) {
			t.Errorf("%s: no DisruptionTarget condition: %v", p.Name, p.Status.Conditions)
		}
	}
	if p, _ := cl.Pod("default", "hog"); !running(p) {
		t.Errorf("the Guaranteed hog is %s, want Running: only BestEffort pods are evicted", p.Status.Phase)
	}

	// The hog levels off at 13Gi: 3Gi available, the threshold clears.
	p, _ = cl.Pod("default", "hog")
	if err := cl.Node("n1").Runtime().SetUsage(p.UID, "app", fake.Usage{MemoryBytes: 13 << 30}); err != nil {
		t.Fatal(err)
	}
	if err := cl.RunUntil(ctx, 10*time.Minute, func() bool {
		return nodeCondition(t, cl, "n1", v1.NodeMemoryPressure) == v1.ConditionFalse
	}); err != nil {
		t.Fatalf("n1's MemoryPressure does not clear: %v", err)
	}
	if p, _ := cl.Pod("default", "hog"); !running(p) {
		t.Errorf("hog %s, want Running", p.Status.Phase)
	}
	return trace(cl, hogStarted)
}

// lowOnMemory begins the message of a pod evicted for memory.available<1Gi.
const lowOnMemory = "The node was low on resource: memory. Threshold quantity: 1Gi, available: "

func trace(cl *sim.Cluster, start time.Time) pressureTrace {
	var tr pressureTrace
	for _, e := range cl.Events() {
		d := e.Time.Sub(start)
		switch {
		case e.Kind == "Node" && e.Object == "n1" && e.What == "MemoryPressure True":
			tr.pressure = append(tr.pressure, d)
		case e.Kind == "Node" && e.Object == "n1" && e.What == "MemoryPressure False":
			tr.cleared = d
		case e.Kind == "Pod" && e.Reason == "Evicted" && strings.HasPrefix(e.Message, lowOnMemory):
			tr.evicted = append(tr.evicted, d)
		}
	}
	return tr
}

// NodeAgent is told which node it configures, after Agent; Eviction
// returning nil leaves a node without an eviction manager.
func TestNodeAgentAndEvictionHooksArePerNode(t *testing.T) {
	var got []string
	cl := newCluster(t, sim.Config{
		Agent: func(c *agent.Config) { c.MaxPods = 7 },
		NodeAgent: func(node string, c *agent.Config) {
			got = append(got, fmt.Sprintf("%s:%d", node, c.MaxPods))
		},
		Eviction: func(node string) *eviction.Config {
			if node == "n2" {
				return nil
			}
			return &eviction.Config{}
		},
	}, "n1", "n2")
	if fmt.Sprint(got) != "[n1:7 n2:7]" {
		t.Errorf("NodeAgent saw %v, want [n1:7 n2:7]", got)
	}
	if cl.Node("n1").Agent().Eviction() == nil || cl.Node("n2").Agent().Eviction() != nil {
		t.Errorf("eviction managers: n1 %v, n2 %v; want n1's only", cl.Node("n1").Agent().Eviction(), cl.Node("n2").Agent().Eviction())
	}
}
