package agent

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
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
	n := newEvictionNode(t)
	sum, err := n.sp.Summary(context.Background(), true)
	if err != nil || sum.Node.Memory == nil || sum.Node.Memory.AvailableBytes == nil {
		t.Fatalf("Summary: %v, %+v: want the node's available memory", err, sum)
	}
	avail := *sum.Node.Memory.AvailableBytes
	if avail < 2*hogMiB<<20 {
		t.Skipf("only %dMi available: not enough to run the hog safely", avail>>20)
	}
	threshold := resource.NewQuantity(int64(avail)-marginMiB<<20, resource.BinarySI)
	t.Logf("memory.available %dMi, threshold %s", avail>>20, threshold)
	n.memBase = avail
	r := n.start(t, eviction.Threshold{Signal: eviction.SignalMemoryAvailable, Value: eviction.ThresholdValue{Quantity: threshold}})
	api, nodeName := n.api, n.name

	// dd holds its one hogMiB block while the write to a pipe nobody
	// reads blocks.
	hog := n.pod("hog", fmt.Sprintf("sleep 1; dd if=/dev/zero bs=%dM count=1 | sleep 3600", hogMiB))
	guaranteed := n.pod("guaranteed", "sleep 3600")
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("32Mi")}
	guaranteed.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl, Limits: rl}
	r.set(guaranteed, hog)

	start := time.Now()
	waitLong(t, "the BestEffort hog evicted", 2*time.Minute, func() bool { return r.phase(hog.UID) == v1.PodFailed })
	st := r.pod(hog.UID).Status
	// The hog allocates one second after its start; the message has the
	// usage the manager saw.
	t.Logf("hog evicted %v after it was given to the agent: %s", time.Since(start).Round(10*time.Millisecond), st.Message)
	msg := regexp.MustCompile(`^The node was low on resource: memory\. Threshold quantity: \S+, available: \S+\. Container hog was using (\d+)(Ki|Mi|Gi)?, request is 0, has larger consumption of memory\. $`)
	if st.Reason != eviction.Reason || !msg.MatchString(st.Message) {
		t.Errorf("hog: reason %q message %q, want Evicted and the kubelet's message", st.Reason, st.Message)
	} else if sm := msg.FindStringSubmatch(st.Message); ptr.To(resource.MustParse(sm[1]+sm[2])).Value() <= 0 {
		// The message has the usage the pass saw: a pass may catch the
		// allocation early, and the machine's other work frees memory at
		// the same time (CI saw 62Mi of 320Mi), so only a usage is asked.
		t.Errorf("hog evicted using %s%s, want its usage of its %dMi", sm[1], sm[2], hogMiB)
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

// evictionNode is a real node for the eviction tests: the CRI runtime,
// package stats over it and the host (nodefs: the file system of the
// temporary directories, which holds containerd's too), a fake apiserver
// for the Node.
type evictionNode struct {
	m      *cri.Manager
	sp     *stats.Provider
	api    *nodetest.Fake
	name   string
	suffix string
	image  string
	mu     sync.Mutex
	pods   []types.UID
	// memBase and fsBase, when set, are the node's memory.available and
	// nodefs.available before the test's pods ran (see ownUsage).
	memBase, fsBase uint64
}

func newEvictionNode(t *testing.T) *evictionNode {
	endpoint := testenv.ExclusiveCRIEndpoint(t)
	image := testenv.TestImage(t)
	ctx := context.Background()
	logs := t.TempDir()
	m, err := cri.New(ctx, cri.Config{Endpoint: endpoint, PodLogsRoot: logs, PodsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	n := &evictionNode{m: m, api: nodetest.New(), name: "evict-" + suffix, suffix: suffix, image: image}
	// Cleanups run last first: these after the agent has stopped its
	// pods (TerminateOnExit) remove them, writable layers and all.
	t.Cleanup(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, uid := range n.pods {
			if err := m.RemovePod(ctx, uid); err != nil {
				t.Errorf("removing pod %s: %v", uid, err)
			}
		}
		m.Close()
	})
	if n.sp, err = stats.New(stats.Config{NodeName: n.name, Runtime: m, RootDir: t.TempDir(), PodLogsDir: logs, PodCgroupRoot: "-"}); err != nil {
		t.Fatal(err)
	}
	return n
}

// start runs an agent with the thresholds, fast passes and a short
// transition period, for the test's time, and no image or container GC
// on the shared runtime.
func (n *evictionNode) start(t *testing.T, ts ...eviction.Threshold) *running {
	return start(t, Config{NodeName: n.name, Runtime: n.m, Sources: []string{src}, TerminateOnExit: true, ShutdownTimeout: 30 * time.Second,
		Node: &node.Config{Nodes: n.api.Nodes(), Leases: n.api.Leases(), UpdateFrequency: 200 * time.Millisecond},
		Eviction: &eviction.Config{Summary: eviction.SummaryProviderFunc(n.ownUsage), Thresholds: ts,
			MonitoringInterval: 500 * time.Millisecond, PressureTransitionPeriod: 3 * time.Second,
			ImageGC:     eviction.ReclaimFunc(func(context.Context) error { return nil }),
			ContainerGC: eviction.ReclaimFunc(func(context.Context) error { return nil })}})
}

// ownUsage is the node's Summary with memory.available and nodefs.available
// moved only by the test's own pods: what was available before they ran
// less what their cgroups and writable layers hold now (as containerd and
// the kernel report it). The machine's other work moves the real figures
// by hundreds of MiB on a shared runner (CI saw the pressure outlast the
// hog while other tests took memory, so the Guaranteed pod was next); the
// pods' own usage is still measured, so the eviction follows from it.
func (n *evictionNode) ownUsage(ctx context.Context, update bool) (*statsapi.Summary, error) {
	sum, err := n.sp.Summary(ctx, update)
	if err != nil || sum == nil {
		return sum, err
	}
	var mem, fs uint64
	for _, p := range sum.Pods {
		if p.Memory != nil && p.Memory.WorkingSetBytes != nil {
			mem += *p.Memory.WorkingSetBytes
		}
		if p.EphemeralStorage != nil && p.EphemeralStorage.UsedBytes != nil {
			fs += *p.EphemeralStorage.UsedBytes
		}
	}
	left := func(base, used uint64) uint64 { return base - min(base, used) }
	if m := sum.Node.Memory; n.memBase > 0 && m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		c := *m
		capacity := *m.AvailableBytes + *m.WorkingSetBytes
		c.AvailableBytes = ptr.To(left(n.memBase, mem))
		c.WorkingSetBytes = ptr.To(capacity - min(capacity, *c.AvailableBytes))
		sum.Node.Memory = &c
	}
	if f := sum.Node.Fs; n.fsBase > 0 && f != nil && f.AvailableBytes != nil {
		c := *f
		c.AvailableBytes = ptr.To(left(n.fsBase, fs))
		sum.Node.Fs = &c
	}
	return sum, nil
}

// pod is a BestEffort pod of one container name running cmd.
func (n *evictionNode) pod(name string, cmd string) *v1.Pod {
	uid := types.UID(name + "-" + n.suffix)
	n.mu.Lock()
	n.pods = append(n.pods, uid)
	n.mu.Unlock()
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + n.suffix, Namespace: "default", UID: uid, CreationTimestamp: metav1.Now()},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []v1.Container{{Name: name, Image: n.image, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", cmd}}}},
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

// writerMiB is what the disk test's pod writes to its writable layer; the
// nodefs threshold is set diskMarginMiB under the available space.
const (
	writerMiB     = 400
	diskMarginMiB = 200
)

// TestEvictionUnderDiskPressureOnContainerd: a pod writing writerMiB into
// its writable layer takes nodefs.available below a soft threshold set
// just under the file system's available space, and is evicted once the
// grace period has passed (by when containerd has measured its layer):
// Failed, Evicted, the kubelet's message with its container's usage; the
// Node reports DiskPressure until the pod's layer is removed and the
// transition period has passed.
func TestEvictionUnderDiskPressureOnContainerd(t *testing.T) {
	n := newEvictionNode(t)
	sum, err := n.sp.Summary(context.Background(), true)
	if err != nil || sum.Node.Fs == nil || sum.Node.Fs.AvailableBytes == nil {
		t.Fatalf("Summary: %v, %+v: want the node's file system", err, sum)
	}
	avail := *sum.Node.Fs.AvailableBytes
	if avail < 4*writerMiB<<20 {
		t.Skipf("only %dMi available on nodefs: not enough to write %dMi safely", avail>>20, writerMiB)
	}
	threshold := resource.NewQuantity(int64(avail)-diskMarginMiB<<20, resource.BinarySI)
	t.Logf("nodefs.available %dMi, threshold %s", avail>>20, threshold)
	n.fsBase = avail
	const grace = 15 * time.Second
	r := n.start(t, eviction.Threshold{Signal: eviction.SignalNodeFsAvailable, Value: eviction.ThresholdValue{Quantity: threshold}, GracePeriod: grace})

	writer := n.pod("writer", fmt.Sprintf("sleep 1; dd if=/dev/zero of=/fill bs=1M count=%d && sync; sleep 3600", writerMiB))
	r.set(writer)
	begin := time.Now()
	waitLong(t, "DiskPressure on the Node", time.Minute, func() bool { return nodeCondition(n.api, n.name, v1.NodeDiskPressure) == v1.ConditionTrue })
	pressure := time.Now()
	waitLong(t, "the writer evicted", 2*time.Minute, func() bool { return r.phase(writer.UID) == v1.PodFailed })
	st := r.pod(writer.UID).Status
	t.Logf("DiskPressure %v after the pod was given to the agent; evicted %v after that: %s",
		pressure.Sub(begin).Round(10*time.Millisecond), time.Since(pressure).Round(10*time.Millisecond), st.Message)
	if d := time.Since(pressure); d < grace-time.Second {
		t.Errorf("evicted %v after DiskPressure, want the %v grace period first", d, grace)
	}
	msg := regexp.MustCompile(`^The node was low on resource: ephemeral-storage\. Threshold quantity: \S+, available: \S+\. Container writer was using (\d+)(Ki|Mi|Gi)?, request is 0, has larger consumption of ephemeral-storage\. $`)
	if st.Reason != eviction.Reason || !msg.MatchString(st.Message) {
		t.Errorf("writer: reason %q message %q, want Evicted and the kubelet's message", st.Reason, st.Message)
	} else if sm := msg.FindStringSubmatch(st.Message); ptr.To(resource.MustParse(sm[1]+sm[2])).Value() < (writerMiB-64)<<20 {
		t.Errorf("writer evicted using %s%s, want about %dMi", sm[1], sm[2], writerMiB)
	}
	// The layer stays until the pod's containers are removed (pod
	// deletion and container GC, here by hand); then the pressure goes.
	waitLong(t, "the writer's containers stopped", time.Minute, func() bool { return r.a.workers.IsPodKnownTerminated(writer.UID) })
	if err := n.m.RemovePod(context.Background(), writer.UID); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	waitLong(t, "DiskPressure gone", time.Minute, func() bool { return nodeCondition(n.api, n.name, v1.NodeDiskPressure) == v1.ConditionFalse })
	t.Logf("DiskPressure False %v after the layer was removed", time.Since(removed).Round(10*time.Millisecond))
}
