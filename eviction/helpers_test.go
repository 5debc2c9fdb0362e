package eviction_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/eviction"
)

// node is a scripted node: what its summary reports.
type node struct {
	mu sync.Mutex
	// memory: available and working set bytes; memUsage adds inactive file.
	memAvail, memWS, memInactive uint64
	// file systems: capacity, available, inodes, inodes free.
	nodeFs, imageFs, containerFs *fsNums
	// pids: max and running.
	maxPID, procs int64
	pods          []statsapi.PodStats
	// sysPods, if set, is the "pods" system container.
	sysPods *statsapi.ContainerStats
	// stamp, if set, gives the stats' time.
	stamp func() time.Time
	calls int
	err   error
	// onGet runs at each Get, before the summary is built.
	onGet func(n *node)
}

type fsNums struct{ capacity, avail, inodes, free uint64 }

func (f *fsNums) stats(t metav1.Time) *statsapi.FsStats {
	if f == nil {
		return nil
	}
	used, iused := f.capacity-f.avail, f.inodes-f.free
	return &statsapi.FsStats{Time: t, CapacityBytes: &f.capacity, AvailableBytes: &f.avail, UsedBytes: &used,
		Inodes: &f.inodes, InodesFree: &f.free, InodesUsed: &iused}
}

func (n *node) Get(context.Context, bool) (*statsapi.Summary, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls++
	if n.onGet != nil {
		n.onGet(n)
	}
	if n.err != nil {
		return nil, n.err
	}
	var t metav1.Time
	if n.stamp != nil {
		t = metav1.NewTime(n.stamp())
	}
	usage := n.memWS + n.memInactive
	s := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "n",
		Memory:  &statsapi.MemoryStats{Time: t, AvailableBytes: ptr.To(n.memAvail), WorkingSetBytes: ptr.To(n.memWS), UsageBytes: &usage},
		Fs:      n.nodeFs.stats(t),
		Runtime: &statsapi.RuntimeStats{ImageFs: n.imageFs.stats(t), ContainerFs: n.containerFs.stats(t)},
	}, Pods: n.pods}
	if n.sysPods != nil {
		s.Node.SystemContainers = []statsapi.ContainerStats{*n.sysPods}
	}
	if n.maxPID > 0 {
		s.Node.Rlimit = &statsapi.RlimitStats{Time: t, MaxPID: ptr.To(n.maxPID), NumOfRunningProcesses: ptr.To(n.procs)}
	}
	return s, nil
}

func (n *node) set(f func(n *node)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n)
}

// killer records evictions.
type killer struct {
	mu     sync.Mutex
	killed []kill
	err    error
}

type kill struct {
	pod  *v1.Pod
	opts eviction.KillOptions
}

func (k *killer) KillPod(_ context.Context, pod *v1.Pod, opts eviction.KillOptions) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.killed = append(k.killed, kill{pod, opts})
	return k.err
}

func (k *killer) names() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, x := range k.killed {
		out = append(out, x.pod.Name)
	}
	return out
}

func (k *killer) last() kill {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.killed[len(k.killed)-1]
}

const (
	mi = 1 << 20
	gi = 1 << 30
)

// podSpec describes a test pod and its usage.
type podSpec struct {
	name      string
	priority  int32
	memReq    string // "" none
	memLim    string
	storReq   string
	memUsed   uint64 // working set
	rootfs    uint64 // writable layer bytes
	logs      uint64
	inodes    uint64 // rootfs inodes
	procs     uint64
	noStats   bool
	static    bool
	mirror    bool
	tolerates bool // memory-pressure NoSchedule
	volume    uint64
}

func makePod(p podSpec) (*v1.Pod, *statsapi.PodStats) {
	res := v1.ResourceRequirements{}
	if p.memReq != "" {
		res.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(p.memReq)}
	}
	if p.storReq != "" {
		if res.Requests == nil {
			res.Requests = v1.ResourceList{}
		}
		res.Requests[v1.ResourceEphemeralStorage] = resource.MustParse(p.storReq)
	}
	if p.memLim != "" {
		res.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(p.memLim), v1.ResourceCPU: resource.MustParse("1")}
		res.Requests[v1.ResourceCPU] = resource.MustParse("1")
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: "ns", UID: types.UID("uid-" + p.name), Annotations: map[string]string{}},
		Spec: v1.PodSpec{Priority: ptr.To(p.priority), Containers: []v1.Container{{Name: "c", Resources: res}},
			Volumes: []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}},
	}
	if p.static {
		pod.Annotations["kubernetes.io/config.source"] = "file"
	}
	if p.mirror {
		pod.Annotations["kubernetes.io/config.source"] = "api"
		pod.Annotations["kubernetes.io/config.mirror"] = "hash"
	}
	if p.tolerates {
		pod.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	}
	if p.noStats {
		return pod, nil
	}
	st := &statsapi.PodStats{
		PodRef: statsapi.PodReference{Name: p.name, Namespace: "ns", UID: string(pod.UID)},
		Memory: &statsapi.MemoryStats{WorkingSetBytes: ptr.To(p.memUsed)},
		Containers: []statsapi.ContainerStats{{Name: "c",
			Memory: &statsapi.MemoryStats{WorkingSetBytes: ptr.To(p.memUsed)},
			Rootfs: &statsapi.FsStats{UsedBytes: ptr.To(p.rootfs), InodesUsed: ptr.To(p.inodes)},
			Logs:   &statsapi.FsStats{UsedBytes: ptr.To(p.logs), InodesUsed: ptr.To(uint64(0))},
		}},
		VolumeStats:  []statsapi.VolumeStats{{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: ptr.To(p.volume), InodesUsed: ptr.To(uint64(0))}}},
		ProcessStats: &statsapi.ProcessStats{ProcessCount: ptr.To(p.procs)},
	}
	return pod, st
}

// env is a manager on a fake clock over a scripted node.
type env struct {
	m     *eviction.Manager
	node  *node
	kill  *killer
	clock *clocktesting.FakeClock
	pods  []*v1.Pod
	gc    *gcRecorder
}

type gcRecorder struct {
	mu                sync.Mutex
	images, container int
	free              func() // frees disk on the scripted node
}

func (g *gcRecorder) DeleteUnusedImages(context.Context) error {
	g.mu.Lock()
	g.images++
	g.mu.Unlock()
	if g.free != nil {
		g.free()
	}
	return nil
}

func (g *gcRecorder) DeleteAllUnusedContainers(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.container++
	return nil
}

// newEnv builds a manager with thresholds (eviction-hard syntax etc.) over
// a node with 8Gi of memory, half available, 100Gi disks half free, and
// pods.
func newEnv(t testing.TB, cfg eviction.Config, specs ...podSpec) *env {
	t.Helper()
	e := &env{
		node: &node{memAvail: 4 * gi, memWS: 4 * gi,
			nodeFs: &fsNums{100 * gi, 50 * gi, 1e6, 5e5}, imageFs: &fsNums{100 * gi, 50 * gi, 1e6, 5e5},
			maxPID: 10000, procs: 100},
		kill:  &killer{},
		clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		gc:    &gcRecorder{},
	}
	for _, s := range specs {
		p, st := makePod(s)
		e.pods = append(e.pods, p)
		if st != nil {
			e.node.pods = append(e.node.pods, *st)
		}
	}
	if cfg.Summary == nil {
		cfg.Summary = e.node
	}
	cfg.Killer = e.kill
	cfg.ActivePods = func() []*v1.Pod { return e.pods }
	cfg.Clock = e.clock
	if cfg.ImageGC == nil {
		cfg.ImageGC = e.gc
	}
	if cfg.ContainerGC == nil {
		cfg.ContainerGC = e.gc
	}
	m, err := eviction.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	return e
}

// sync runs one pass after d on the clock.
func (e *env) sync(t testing.TB, d time.Duration) []*v1.Pod {
	t.Helper()
	e.clock.Step(d)
	evicted, err := e.m.Synchronize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return evicted
}

func thresholds(t testing.TB, hard, soft, grace, reclaim string) []eviction.Threshold {
	t.Helper()
	parse := func(s, sep string) map[string]string {
		m, err := eviction.ParseMap(s, sep)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ts, err := eviction.ParseThresholdConfig(false, parse(hard, "<"), parse(soft, "<"), parse(grace, "="), parse(reclaim, "="))
	if err != nil {
		t.Fatal(err)
	}
	if ts == nil {
		ts = []eviction.Threshold{}
	}
	return ts
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func pressure(m *eviction.Manager) string {
	return fmt.Sprintf("mem=%v disk=%v pid=%v", m.MemoryPressure(), m.DiskPressure(), m.PIDPressure())
}
