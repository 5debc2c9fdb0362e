package status_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/status/statustest"
)

// gatedClient holds each status PATCH of the pods in gated until release
// is closed, and records which pods' patches are in flight at once.
type gatedClient struct {
	*statustest.PodClient
	gated   map[string]bool
	release chan struct{}

	mu       sync.Mutex
	inFlight map[string]int
	overlap  bool     // one pod's patches ran at once
	started  []string // patches as they started
	entered  chan string
}

func (c *gatedClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*v1.Pod, error) {
	c.mu.Lock()
	c.inFlight[name]++
	if c.inFlight[name] > 1 {
		c.overlap = true
	}
	c.started = append(c.started, name)
	c.mu.Unlock()
	c.entered <- name
	if c.gated[name] {
		<-c.release
	}
	defer func() {
		c.mu.Lock()
		c.inFlight[name]--
		c.mu.Unlock()
	}()
	return c.PodClient.Patch(ctx, name, pt, data, opts, sub...)
}

func runManager(t *testing.T, f *statustest.Fake, gated []string, workers int) (*status.Manager, *gatedClient) {
	t.Helper()
	g := &gatedClient{PodClient: f.Pods("ns"), gated: map[string]bool{}, release: make(chan struct{}),
		inFlight: map[string]int{}, entered: make(chan string, 100)}
	for _, n := range gated {
		g.gated[n] = true
	}
	m, _ := newManager(t, f, func(c *status.Config) {
		c.PodClient = func(string) status.PodClient { return g }
		c.SyncWorkers = workers
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	t.Cleanup(func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
		cancel()
		<-done
	})
	return m, g
}

func awaitPatch(t *testing.T, g *gatedClient, want string) {
	t.Helper()
	select {
	case got := <-g.entered:
		require.Equal(t, want, got)
	case <-time.After(10 * time.Second):
		t.Fatalf("no status patch of %s", want)
	}
}

// A pod's status is sent while another pod's sync is still waiting on the
// apiserver: no pod waits for a batch of others to finish.
func TestChangeIsSentWhileAnotherPodsSyncIsInFlight(t *testing.T) {
	slow, fast := testPod("slow", "uid-slow"), testPod("fast", "uid-fast")
	f := statustest.New(slow, fast)
	m, g := runManager(t, f, []string{"slow"}, 2)

	m.SetPodStatus(slow, runningStatus("cri://a"))
	awaitPatch(t, g, "slow")
	m.SetPodStatus(fast, runningStatus("cri://b"))
	awaitPatch(t, g, "fast")
	require.Eventually(t, func() bool {
		p, _ := f.Pod("ns", "fast")
		return p.Status.Phase == v1.PodRunning
	}, 10*time.Second, time.Millisecond, "fast's patch completes while slow's is held")
	p, _ := f.Pod("ns", "slow")
	assert.Empty(t, p.Status.Phase, "slow's patch is still held")
}

// A change that lands while the pod's own sync is in flight is sent after
// that sync ends, never beside it, and the apiserver ends with the latest.
func TestChangeDuringItsPodsSyncIsSentAfterIt(t *testing.T) {
	pod := testPod("p", "uid1")
	f := statustest.New(pod)
	m, g := runManager(t, f, []string{"p"}, 4)

	m.SetPodStatus(pod, runningStatus("cri://a"))
	awaitPatch(t, g, "p")
	later := runningStatus("cri://a")
	later.Message = "later"
	m.SetPodStatus(pod, later)
	select {
	case <-g.entered:
		t.Fatal("a second patch of the pod started while its first was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(g.release)
	awaitPatch(t, g, "p")
	require.Eventually(t, func() bool {
		p, _ := f.Pod("ns", "p")
		return p.Status.Message == "later"
	}, 10*time.Second, time.Millisecond)
	g.mu.Lock()
	defer g.mu.Unlock()
	assert.False(t, g.overlap)
}

// One worker sends pods in the order their statuses changed.
func TestPodsAreSentInTheOrderTheyChanged(t *testing.T) {
	first := testPod("first", "uid-first")
	names := []string{"first", "b", "c", "d"}
	pods := []*v1.Pod{first}
	for _, n := range names[1:] {
		pods = append(pods, testPod(n, types.UID("uid-"+n)))
	}
	f := statustest.New(pods...)
	m, g := runManager(t, f, []string{"first"}, 1)
	m.SetPodStatus(first, runningStatus("cri://a"))
	awaitPatch(t, g, "first")
	// The worker is held on first: the others queue up behind it.
	for _, p := range pods[1:] {
		m.SetPodStatus(p, runningStatus("cri://a"))
	}
	close(g.release)
	for _, n := range names[1:] {
		awaitPatch(t, g, n)
	}
}

// convertingClient answers a patch as a real apiserver does: its internal
// pod keeps IP lists only, so podIPs and hostIPs come back filled from
// podIP and hostIP.
type convertingClient struct{ *statustest.PodClient }

func (c convertingClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*v1.Pod, error) {
	p, err := c.PodClient.Patch(ctx, name, pt, data, opts, sub...)
	if err == nil {
		if len(p.Status.PodIPs) == 0 && p.Status.PodIP != "" {
			p.Status.PodIPs = []v1.PodIP{{IP: p.Status.PodIP}}
		}
		if len(p.Status.HostIPs) == 0 && p.Status.HostIP != "" {
			p.Status.HostIPs = []v1.HostIP{{IP: p.Status.HostIP}}
		}
	}
	return p, err
}

// A provider's status with podIP and hostIP alone (virtual-kubelet's mock
// sets no lists) is sent as it is, and a later change's patch does not
// send the lists the apiserver filled from them.
func TestSingleIPsAreNoChangeAgainstTheListsTheAPIServerFilled(t *testing.T) {
	ctx := context.Background()
	pod := testPod("p", "uid1")
	pod.ResourceVersion = "1" // as delivered: its first patch builds on it
	f := statustest.New(pod)
	m, _ := newManager(t, f, func(c *status.Config) {
		c.PodClient = func(ns string) status.PodClient { return convertingClient{f.Pods(ns)} }
	})
	st := runningStatus("cri://a")
	st.PodIP, st.HostIP = "5.6.7.8", "1.2.3.4"
	m.SetPodStatus(pod, st)
	m.Sync(ctx)
	acts := f.Actions()
	require.Len(t, acts, 1)
	assert.NotContains(t, string(acts[0].Patch), "IPs", "the single IPs only")

	st.Message = "later"
	m.SetPodStatus(pod, st)
	f.ClearActions()
	m.Sync(ctx)
	acts = f.Actions()
	require.Len(t, acts, 1)
	assert.Equal(t, statustest.VerbPatch, acts[0].Verb)
	assert.NotContains(t, string(acts[0].Patch), "IPs", "only the message changed")

	// A new single IP is a change: the list filled from the old one goes.
	st.PodIP = "5.6.7.9"
	m.SetPodStatus(pod, st)
	f.ClearActions()
	m.Sync(ctx)
	acts = f.Actions()
	require.Len(t, acts, 1)
	assert.Contains(t, string(acts[0].Patch), `"podIP":"5.6.7.9"`)
	assert.Contains(t, string(acts[0].Patch), `"podIPs":[{"$patch":"replace"}]`)
	assert.NotContains(t, string(acts[0].Patch), "hostIPs")
}

// syncWorkers counts the goroutines running a sync worker.
func syncWorkers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "status.(*Manager).work(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Workers start with queued pods, never more than SyncWorkers, and end
// when the queue is empty: an idle Manager (an idle node) holds none.
func TestSyncWorkersRunOnlyWhilePodsAreQueued(t *testing.T) {
	a, b, c := testPod("a", "uid-a"), testPod("b", "uid-b"), testPod("c", "uid-c")
	f := statustest.New(a, b, c)
	m, g := runManager(t, f, []string{"a", "b", "c"}, 2)
	require.Never(t, func() bool { return syncWorkers() > 0 }, 50*time.Millisecond, time.Millisecond,
		"a worker runs with nothing queued")

	for _, p := range []*v1.Pod{a, b, c} {
		m.SetPodStatus(p, runningStatus("cri://"+p.Name))
	}
	// a and b, in either order: two workers take them at once.
	first := map[string]bool{}
	for range 2 {
		select {
		case n := <-g.entered:
			first[n] = true
		case <-time.After(10 * time.Second):
			t.Fatal("two patches did not start")
		}
	}
	require.Equal(t, map[string]bool{"a": true, "b": true}, first)
	select {
	case n := <-g.entered:
		t.Fatalf("a third patch (%s) started with SyncWorkers 2", n)
	case <-time.After(50 * time.Millisecond):
	}
	assert.Equal(t, 2, syncWorkers())
	close(g.release)
	awaitPatch(t, g, "c")
	require.Eventually(t, func() bool { return syncWorkers() == 0 }, 10*time.Second, time.Millisecond,
		"workers still run with the queue empty")
	for _, n := range []string{"a", "b", "c"} {
		p, _ := f.Pod("ns", n)
		assert.Equal(t, v1.PodRunning, p.Status.Phase, n)
	}
}
