package agent

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/stats"
)

// hogMiB is what the BestEffort pod holds; the threshold is set margin
// below the node's available memory, so the hog crosses it and the
// machine never comes near trouble.
const (
	hogMiB    = 320
	marginMiB = 120
)

// TestEvictionUnderMemoryPressureOnContainerd: a BestEffort pod holding
// hogMiB of memory on a real node takes memory.available below a threshold
// set just under what the node has available (read from the stats Summary
// first) and is evicted: Failed, Evicted, the kubelet's message naming its
// container's usage; the Guaranteed pod beside it keeps running; the Node
// reports MemoryPressure, then not once the transition period has passed.
func TestEvictionUnderMemoryPressureOnContainerd(t *testing.T) {
	endpoint := testenv.ExclusiveCRIEndpoint(t)
	image := testenv.TestImage(t)
	ctx := context.Background()
	m, err := cri.New(ctx, cri.Config{Endpoint: endpoint, PodLogsRoot: t.TempDir(), PodsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the agent stopped its pods (TerminateOnExit): cleanups
	// run last first.
	t.Cleanup(func() { m.Close() })
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	nodeName := "evict-" + suffix
	sp, err := stats.New(stats.Config{NodeName: nodeName, Runtime: m, PodLogsDir: "-", PodCgroupRoot: "-"})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := sp.Summary(ctx, true)
	if err != nil || sum.Node.Memory == nil || sum.Node.Memory.AvailableBytes == nil {
		t.Fatalf("Summary: %v, %+v: want the node's available memory", err, sum)
	}
	avail := *sum.Node.Memory.AvailableBytes
	if avail < 2*hogMiB<<20 {
		t.Skipf("only %dMi available: not enough to run the hog safely", avail>>20)
	}
	threshold := resource.NewQuantity(int64(avail)-marginMiB<<20, resource.BinarySI)
	t.Logf("memory.available %dMi, threshold %s", avail>>20, threshold)

	api := nodetest.New()
	c := Config{NodeName: nodeName, Runtime: m, Sources: []string{src}, TerminateOnExit: true, ShutdownTimeout: 30 * time.Second,
		Node: &node.Config{Nodes: api.Nodes(), Leases: api.Leases(), UpdateFrequency: 200 * time.Millisecond},
		Eviction: &eviction.Config{Summary: eviction.SummaryProviderFunc(sp.Summary),
			Thresholds: []eviction.Threshold{{Signal: eviction.SignalMemoryAvailable, Value: eviction.ThresholdValue{Quantity: threshold}}},
			// Fast passes and a short transition period, for the test's
			// time; no image or container GC on the shared runtime.
			MonitoringInterval: 500 * time.Millisecond, PressureTransitionPeriod: 3 * time.Second,
			ImageGC:     eviction.ReclaimFunc(func(context.Context) error { return nil }),
			ContainerGC: eviction.ReclaimFunc(func(context.Context) error { return nil })}}
	r := start(t, c)

	mk := func(name string, cmd string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix, Namespace: "default", UID: types.UID(name + "-" + suffix), CreationTimestamp: metav1.Now()},
			Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []v1.Container{{Name: name, Image: image, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", cmd}}}},
		}
	}
	// dd holds its one hogMiB block while the write to a pipe nobody
	// reads blocks.
	hog := mk("hog", fmt.Sprintf("sleep 1; dd if=/dev/zero bs=%dM count=1 | sleep 3600", hogMiB))
	guaranteed := mk("guaranteed", "sleep 3600")
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("32Mi")}
	guaranteed.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl, Limits: rl}
	r.set(guaranteed, hog)

	start := time.Now()
	waitLong(t, "the BestEffort hog evicted", 2*time.Minute, func() bool { return r.phase(hog.UID) == v1.PodFailed })
	st := r.pod(hog.UID).Status
	// The hog allocates one second after its start; the message has the
	// usage the manager saw.
	t.Logf("hog evicted %v after it was given to the agent: %s", time.Since(start).Round(10*time.Millisecond), st.Message)
	msg := regexp.MustCompile(`^The node was low on resource: memory\. Threshold quantity: \S+, available: \S+\. Container hog was using (\d+)(Ki|Mi), request is 0, has larger consumption of memory\. $`)
	if st.Reason != eviction.Reason || !msg.MatchString(st.Message) {
		t.Errorf("hog: reason %q message %q, want Evicted and the kubelet's message", st.Reason, st.Message)
	} else if sm := msg.FindStringSubmatch(st.Message); ptr.To(resource.MustParse(sm[1]+sm[2])).Value() < (hogMiB-64)<<20 {
		// Evicted for its allocation, not for the machine's other load.
		t.Errorf("hog evicted using %s%s, want about %dMi", sm[1], sm[2], hogMiB)
	}
	if !hasPodCondition(st, v1.DisruptionTarget) {
		t.Errorf("hog has no DisruptionTarget condition: %+v", st.Conditions)
	}
	evicted := time.Now()
	waitLong(t, "MemoryPressure on the Node", 30*time.Second, func() bool { return nodeCondition(api, nodeName, v1.NodeMemoryPressure) == v1.ConditionTrue })
	if p := r.phase(guaranteed.UID); p != v1.PodRunning {
		t.Errorf("the Guaranteed pod is %v, want Running", p)
	}
	// With the hog gone the node has its memory back; the condition goes
	// once the transition period has passed.
	waitLong(t, "MemoryPressure gone", time.Minute, func() bool { return nodeCondition(api, nodeName, v1.NodeMemoryPressure) == v1.ConditionFalse })
	t.Logf("MemoryPressure False %v after the eviction", time.Since(evicted).Round(10*time.Millisecond))
	if p := r.phase(guaranteed.UID); p != v1.PodRunning {
		t.Errorf("the Guaranteed pod is %v after the pressure, want Running", p)
	}
}

func hasPodCondition(st v1.PodStatus, ct v1.PodConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == ct && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

func nodeCondition(api *nodetest.Fake, name string, ct v1.NodeConditionType) v1.ConditionStatus {
	n, ok := api.Node(name)
	if !ok {
		return ""
	}
	for _, c := range n.Status.Conditions {
		if c.Type == ct {
			return c.Status
		}
	}
	return ""
}

// waitLong is waitFor with a deadline for a real runtime on a loaded
// machine.
func waitLong(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
