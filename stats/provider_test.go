package stats_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/stats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	fixtureUID = "0b9d6c1e-1111-2222-3333-444455556666"
	fixtureCID = "abc123"
)

func newPod(name string, containers ...string) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID = name, "default", types.UID("uid-"+name)
	p.Spec.RestartPolicy = v1.RestartPolicyAlways
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: c + ":1"})
	}
	return p
}

func newFake(t testing.TB) (*fake.Runtime, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	rt, err := fake.New(fake.Config{Clock: clk})
	require.NoError(t, err)
	return rt, clk
}

func newProvider(t testing.TB, c stats.Config) *stats.Provider {
	t.Helper()
	if c.NodeName == "" {
		c.NodeName = "node-1"
	}
	p, err := stats.New(c)
	require.NoError(t, err)
	return p
}

func findPod(t testing.TB, s *statsapi.Summary, name string) statsapi.PodStats {
	t.Helper()
	for _, p := range s.Pods {
		if p.PodRef.Name == name {
			return p
		}
	}
	t.Fatalf("pod %s not in the summary", name)
	return statsapi.PodStats{}
}

func TestNewRejectsBadConfig(t *testing.T) {
	rt, _ := newFake(t)
	for name, c := range map[string]stats.Config{
		"no node name":           {Runtime: rt},
		"no runtime":             {NodeName: "n"},
		"negative update period": {NodeName: "n", Runtime: rt, UpdatePeriod: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := stats.New(c)
			assert.ErrorIs(t, err, stats.ErrInvalidConfig)
		})
	}
}

// TestSummaryOnFake checks the summary of scripted usage: the rates
// between two updates, sums, node totals and filesystems.
func TestSummaryOnFake(t *testing.T) {
	ctx := context.Background()
	rt, clk := newFake(t)
	rt.SetContainerBehavior("app", fake.Behavior{Usage: fake.Usage{CPUMilli: 500, MemoryBytes: 100 << 20, DiskBytes: 10 << 20}})
	rt.SetContainerBehavior("side", fake.Behavior{Usage: fake.Usage{CPUMilli: 250, MemoryBytes: 50 << 20, MemoryGrowth: 1 << 20}})
	rt.SetNodeCapacity(fake.NodeCapacity{MemoryBytes: 1 << 30, FsBytes: 10 << 30})
	rt.SetNodeOverhead(fake.Usage{MemoryBytes: 200 << 20, DiskBytes: 1 << 30})
	rt.AddRunningPod(newPod("web", "app", "side"))
	sp := newProvider(t, stats.Config{Runtime: rt, Clock: clk})

	first, err := sp.Summary(ctx, true)
	require.NoError(t, err)
	web := findPod(t, first, "web")
	require.Len(t, web.Containers, 2)
	assert.Nil(t, web.Containers[0].CPU.UsageNanoCores, "no rate from one sample")

	clk.Step(10 * time.Second)
	s, err := sp.Summary(ctx, true)
	require.NoError(t, err)
	web = findPod(t, s, "web")
	byName := map[string]statsapi.ContainerStats{}
	for _, c := range web.Containers {
		byName[c.Name] = c
	}
	app, side := byName["app"], byName["side"]
	assert.Equal(t, uint64(5e8), *app.CPU.UsageNanoCores, "500m over 10s")
	assert.Equal(t, uint64(5e9), *app.CPU.UsageCoreNanoSeconds)
	assert.Equal(t, uint64(2.5e8), *side.CPU.UsageNanoCores)
	assert.Equal(t, uint64(100<<20), *app.Memory.WorkingSetBytes)
	assert.Equal(t, uint64(60<<20), *side.Memory.WorkingSetBytes, "50Mi grown by 1Mi/s for 10s")
	assert.Equal(t, uint64(7.5e8), *web.CPU.UsageNanoCores, "pod CPU is its containers' sum")
	assert.Equal(t, uint64(160<<20), *web.Memory.WorkingSetBytes, "pod memory is its containers' sum")
	assert.Equal(t, uint64(10<<20), *web.EphemeralStorage.UsedBytes, "ephemeral storage is the writable layers")
	assert.Equal(t, t0, web.StartTime.Time.UTC())

	n := s.Node
	assert.Equal(t, "node-1", n.NodeName)
	assert.Equal(t, uint64(7.5e8), *n.CPU.UsageNanoCores)
	assert.Equal(t, uint64(360<<20), *n.Memory.WorkingSetBytes, "overhead plus pods")
	assert.Equal(t, uint64(1<<30-360<<20), *n.Memory.AvailableBytes, "capacity less working set")
	assert.Equal(t, uint64(10<<30), *n.Fs.CapacityBytes)
	assert.Equal(t, uint64(1<<30+10<<20+2<<20), *n.Fs.UsedBytes, "overhead, writable layers and two 1Mi images on nodefs")
	assert.Equal(t, *n.Fs.CapacityBytes-*n.Fs.UsedBytes, *n.Fs.AvailableBytes)
	require.NotNil(t, n.Runtime)
	assert.Equal(t, uint64(2<<20), *n.Runtime.ImageFs.UsedBytes)
	assert.Equal(t, n.Fs.CapacityBytes, n.Runtime.ImageFs.CapacityBytes, "an image fs of unknown size is nodefs")
	assert.Equal(t, n.Runtime.ImageFs, n.Runtime.ContainerFs)
	assert.Equal(t, int64(2), *n.Rlimit.NumOfRunningProcesses)
	assert.Equal(t, int64(4194304), *n.Rlimit.MaxPID)
	assert.Empty(t, n.SystemContainers, "no pods cgroup on the fake")

	clk.Step(10 * time.Second)
	got, err := sp.GetStatsSummary(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(7.5e8), *findPod(t, got, "web").CPU.UsageNanoCores, "a read without update serves the last rates")
	assert.Equal(t, uint64(15e9), *findPod(t, got, "web").CPU.UsageCoreNanoSeconds, "and the current CPU time (750m for 20s)")
}

// TestUsagePushesTheNodeIntoPressure is what eviction will see: a pod's
// memory grows on the clock and the node's available memory falls.
func TestUsagePushesTheNodeIntoPressure(t *testing.T) {
	ctx := context.Background()
	rt, clk := newFake(t)
	rt.SetNodeCapacity(fake.NodeCapacity{MemoryBytes: 1 << 30})
	pod := newPod("hog", "app")
	rt.AddRunningPod(pod)
	require.NoError(t, rt.SetUsage(pod.UID, "app", fake.Usage{MemoryBytes: 100 << 20, MemoryGrowth: 100 << 20}))
	assert.ErrorIs(t, rt.SetUsage(pod.UID, "nope", fake.Usage{}), runtime.ErrNotFound)
	sp := newProvider(t, stats.Config{Runtime: rt, Clock: clk})

	avail := func() uint64 {
		s, err := sp.GetStatsSummary(ctx)
		require.NoError(t, err)
		return *s.Node.Memory.AvailableBytes
	}
	assert.Equal(t, uint64(924<<20), avail())
	clk.Step(5 * time.Second)
	assert.Equal(t, uint64(424<<20), avail())
	clk.Step(10 * time.Second)
	assert.Equal(t, uint64(0), avail(), "never below zero")
}

// stubRuntime is a runtime with none of the optional stats capabilities.
type stubRuntime struct {
	runtime.Runtime
	pods []*runtime.Pod
}

func (s stubRuntime) GetPods(context.Context, bool) ([]*runtime.Pod, error) { return s.pods, nil }

type failingPods struct{ runtime.Runtime }

func (failingPods) ListPodStats(context.Context) ([]runtime.PodStats, error) {
	return nil, errors.New("boom")
}

type failingNode struct{ runtime.Runtime }

func (failingNode) NodeStats(context.Context) (*runtime.NodeStats, error) {
	return nil, errors.New("boom")
}

type failingImageFs struct{ runtime.Runtime }

func (failingImageFs) ImageFsInfo(context.Context) (runtime.ImageFsStats, error) {
	return runtime.ImageFsStats{}, errors.New("boom")
}

func TestSourceErrorsFailTheSummary(t *testing.T) {
	rt, clk := newFake(t)
	for name, r := range map[string]runtime.Runtime{
		"pod stats": failingPods{rt}, "node stats": failingNode{rt}, "image fs": failingImageFs{stubRuntime{}},
	} {
		t.Run(name, func(t *testing.T) {
			sp := newProvider(t, stats.Config{Runtime: r, Clock: clk, ProcRoot: "testdata/proc", CgroupRoot: "testdata/cgroupv1", RootDir: t.TempDir()})
			_, err := sp.GetStatsSummary(context.Background())
			assert.ErrorContains(t, err, "boom")
		})
	}
}

// TestHostSources builds summaries from fixture /proc and cgroup trees,
// for a runtime that measures nothing itself.
func TestHostSources(t *testing.T) {
	pods := []*runtime.Pod{{ID: fixtureUID, Name: "web", Namespace: "default", CreatedAt: uint64(t0.UnixNano()),
		Containers: []*runtime.Container{
			{ID: runtime.ContainerID{Type: "containerd", ID: fixtureCID}, Name: "app", State: runtime.ContainerStateRunning, CreatedAt: t0.UnixNano()},
			{ID: runtime.ContainerID{Type: "containerd", ID: "dead"}, Name: "old", State: runtime.ContainerStateExited},
		}}}
	for _, tc := range []struct {
		name, cgroups, podRoot     string
		nodeCPU, nodeWS, nodeAvail uint64
		podCPU, podWS, ctrWS       *uint64
		podProcs, podsSystemWS     *uint64
		wantNodeRSS                uint64
	}{
		{name: "cgroup v1 without pod cgroups: pods have no usage", cgroups: "testdata/cgroupv1", podRoot: "-",
			nodeCPU: 200e9, nodeWS: 3e9, nodeAvail: 8192000000 - 3e9, wantNodeRSS: 2e9},
		{name: "cgroup v1 with pod cgroups", cgroups: "testdata/cgroupv1", podRoot: "/kubepods",
			nodeCPU: 200e9, nodeWS: 3e9, nodeAvail: 8192000000 - 3e9, wantNodeRSS: 2e9,
			podCPU: ptr(uint64(2e9)), podWS: ptr(uint64(2.5e8)), ctrWS: ptr(uint64(2.1e8)), podProcs: ptr(uint64(7)), podsSystemWS: ptr(uint64(6e8))},
		{name: "cgroup v2 with systemd pod cgroups found: node memory from meminfo", cgroups: "testdata/cgroupv2",
			nodeCPU: 150e9, nodeWS: 5120000000, nodeAvail: 3072000000, wantNodeRSS: 2560000000,
			podCPU: ptr(uint64(2e9)), podWS: ptr(uint64(2.5e8)), ctrWS: ptr(uint64(2.1e8)), podProcs: ptr(uint64(7)), podsSystemWS: ptr(uint64(6e8))},
		{name: "no cgroups: node CPU from /proc/stat", cgroups: "testdata/nope",
			nodeCPU: 15e9, nodeWS: 5120000000, nodeAvail: 3072000000, wantNodeRSS: 2560000000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			sp := newProvider(t, stats.Config{Runtime: stubRuntime{pods: pods}, Clock: clocktesting.NewFakeClock(t0),
				ProcRoot: "testdata/proc", CgroupRoot: tc.cgroups, PodCgroupRoot: tc.podRoot, RootDir: root, PodLogsDir: "-"})
			s, err := sp.GetStatsSummary(context.Background())
			require.NoError(t, err)
			n := s.Node
			assert.Equal(t, time.Unix(1700000000, 0), n.StartTime.Time.Local(), "boot time")
			assert.Equal(t, tc.nodeCPU, *n.CPU.UsageCoreNanoSeconds)
			assert.Equal(t, tc.nodeWS, *n.Memory.WorkingSetBytes)
			assert.Equal(t, tc.nodeAvail, *n.Memory.AvailableBytes)
			assert.Equal(t, tc.wantNodeRSS, *n.Memory.RSSBytes)
			assert.Equal(t, uint64(750000*1024), *n.Swap.SwapAvailableBytes)
			assert.Equal(t, uint64(250000*1024), *n.Swap.SwapUsageBytes)
			assert.NotZero(t, *n.Fs.CapacityBytes, "statfs of RootDir")
			assert.Equal(t, int64(63382), *n.Rlimit.MaxPID)
			assert.Nil(t, n.Runtime, "no image fs without ImageFsInfoer")

			require.Len(t, s.Pods, 1)
			p := s.Pods[0]
			assert.Equal(t, statsapi.PodReference{Name: "web", Namespace: "default", UID: fixtureUID}, p.PodRef)
			require.Len(t, p.Containers, 1, "only running containers")
			c := p.Containers[0]
			if tc.podCPU == nil {
				assert.Nil(t, p.CPU)
				assert.Nil(t, c.Memory)
				assert.Empty(t, n.SystemContainers)
				return
			}
			assert.Equal(t, tc.podCPU, p.CPU.UsageCoreNanoSeconds)
			assert.Equal(t, tc.podWS, p.Memory.WorkingSetBytes)
			assert.Equal(t, uint64(512<<20-2.5e8), *p.Memory.AvailableBytes, "pod limit less working set")
			assert.Equal(t, tc.ctrWS, c.Memory.WorkingSetBytes)
			assert.Nil(t, c.Memory.AvailableBytes, "no limit, no available")
			assert.Equal(t, tc.podProcs, p.ProcessStats.ProcessCount)
			require.Len(t, n.SystemContainers, 1)
			assert.Equal(t, statsapi.SystemContainerPods, n.SystemContainers[0].Name)
			assert.Equal(t, tc.podsSystemWS, n.SystemContainers[0].Memory.WorkingSetBytes)
		})
	}
}

func TestCPUAndMemoryOnly(t *testing.T) {
	rt, clk := newFake(t)
	rt.SetContainerBehavior("app", fake.Behavior{Usage: fake.Usage{CPUMilli: 100, MemoryBytes: 1 << 20, DiskBytes: 1 << 20}})
	rt.AddRunningPod(newPod("web", "app"))
	sp := newProvider(t, stats.Config{Runtime: rt, Clock: clk})
	s, err := sp.GetCPUAndMemoryStats(context.Background())
	require.NoError(t, err)
	assert.Nil(t, s.Node.Fs)
	assert.Nil(t, s.Node.Runtime)
	assert.Nil(t, s.Node.Rlimit)
	assert.NotNil(t, s.Node.CPU)
	p := findPod(t, s, "web")
	assert.Nil(t, p.EphemeralStorage)
	assert.Nil(t, p.Containers[0].Rootfs)
	assert.Equal(t, uint64(1<<20), *p.Containers[0].Memory.WorkingSetBytes)
}

func TestRunUpdatesRates(t *testing.T) {
	rt, clk := newFake(t)
	rt.SetContainerBehavior("app", fake.Behavior{Usage: fake.Usage{CPUMilli: 1000}})
	rt.AddRunningPod(newPod("web", "app"))
	sp := newProvider(t, stats.Config{Runtime: rt, Clock: clk, UpdatePeriod: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- sp.Run(ctx) }()
	rate := func() *uint64 {
		s, err := sp.GetStatsSummary(context.Background())
		require.NoError(t, err)
		return findPod(t, s, "web").Containers[0].CPU.UsageNanoCores
	}
	require.Eventually(t, func() bool {
		if !clk.HasWaiters() {
			return false
		}
		clk.Step(time.Second)
		return rate() != nil
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, uint64(1e9), *rate(), "one core")
	cancel()
	assert.NoError(t, <-done)
}

func ptr[T any](v T) *T { return &v }

// writableLayers is a stubRuntime whose pods' containers have writable
// layers, as a CRI runtime reports them.
type writableLayers struct{ stubRuntime }

func (w writableLayers) ListPodStats(context.Context) ([]runtime.PodStats, error) {
	return []runtime.PodStats{{UID: fixtureUID, Name: "web", Namespace: "default", CreatedAt: t0,
		Containers: []runtime.ContainerStats{{ID: runtime.ContainerID{Type: "containerd", ID: fixtureCID}, Name: "app", CreatedAt: t0,
			WritableLayer: &runtime.FsUsage{Time: t0, UsedBytes: ptr(uint64(4096)), InodesUsed: ptr(uint64(3))}}}}}, nil
}

func TestContainerLogsCountInEphemeralStorage(t *testing.T) {
	logs := t.TempDir()
	dir := filepath.Join(logs, "default_web_"+fixtureUID, "app")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "0.log"), make([]byte, 1000), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "1.log"), make([]byte, 24), 0o644))
	sp := newProvider(t, stats.Config{Runtime: writableLayers{}, Clock: clocktesting.NewFakeClock(t0),
		ProcRoot: "testdata/proc", CgroupRoot: "testdata/nope", RootDir: t.TempDir(), PodLogsDir: logs})
	s, err := sp.GetStatsSummary(context.Background())
	require.NoError(t, err)
	require.Len(t, s.Pods, 1)
	c := s.Pods[0].Containers[0]
	assert.Equal(t, uint64(1024), *c.Logs.UsedBytes, "the container's log files")
	assert.Equal(t, uint64(3), *c.Logs.InodesUsed, "its directory and two files")
	assert.Equal(t, s.Node.Fs.CapacityBytes, c.Logs.CapacityBytes, "logs are on nodefs")
	assert.Equal(t, uint64(4096), *c.Rootfs.UsedBytes)
	eph := s.Pods[0].EphemeralStorage
	assert.Equal(t, uint64(4096+1024), *eph.UsedBytes, "writable layer plus logs")
	assert.Equal(t, uint64(3+3), *eph.InodesUsed)
	assert.Equal(t, s.Node.Fs.AvailableBytes, eph.AvailableBytes)
}
