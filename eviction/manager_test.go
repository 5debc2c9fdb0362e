package eviction_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/eviction"
	nodepkg "github.com/nodekit/nodekit/node"
)

var (
	_ nodepkg.PressureSource    = (*eviction.Manager)(nil)
	_ admission.PodAdmitHandler = (*eviction.Manager)(nil)
	_ eviction.ImageGC          = eviction.ReclaimFunc(nil)
	_ eviction.SummaryProvider  = eviction.SummaryProviderFunc(nil)
	_ eviction.PodKiller        = eviction.PodKillerFunc(nil)
	_ eviction.ContainerGC      = eviction.ReclaimFunc(nil)
)

// memoryPods are a BestEffort pod, a Burstable pod over its request and a
// Guaranteed one within it, of equal priority.
var memoryPods = []podSpec{
	{name: "guaranteed", memReq: "1Gi", memLim: "1Gi", memUsed: 900 * mi},
	{name: "burstable", memReq: "100Mi", memUsed: 500 * mi},
	{name: "besteffort", memUsed: 200 * mi},
}

func TestMemoryThresholds(t *testing.T) {
	for _, tc := range []struct {
		name              string
		hard, soft, grace string
		maxGrace          int64
		avail             uint64
		steps             []time.Duration // passes after these delays, last checked
		wantEvicted       []string
		wantPressure      bool
		wantGrace         *int64
	}{
		{name: "threshold not met evicts nothing", hard: "memory.available<1Gi", avail: 2 * gi, steps: []time.Duration{0}},
		{name: "hard threshold met evicts the pod most over its request at once, grace 1s",
			hard: "memory.available<1Gi", avail: 500 * mi, steps: []time.Duration{0},
			wantEvicted: []string{"burstable"}, wantPressure: true, wantGrace: i64(1)},
		{name: "soft threshold within its grace period reports pressure and evicts nothing",
			soft: "memory.available<1Gi", grace: "memory.available=2m", avail: 500 * mi, steps: []time.Duration{0, time.Minute},
			wantPressure: true},
		{name: "soft threshold past its grace period evicts with the max pod grace period",
			soft: "memory.available<1Gi", grace: "memory.available=2m", maxGrace: 30, avail: 500 * mi,
			steps: []time.Duration{0, time.Minute, time.Minute}, wantEvicted: []string{"burstable"}, wantPressure: true, wantGrace: i64(30)},
		{name: "soft threshold with a negative max pod grace period keeps the pod's",
			soft: "memory.available<1Gi", grace: "memory.available=1m", maxGrace: -1, avail: 500 * mi,
			steps: []time.Duration{0, time.Minute}, wantEvicted: []string{"burstable"}, wantPressure: true},
		{name: "percentage threshold of capacity", hard: "memory.available<10%", avail: 800 * mi, steps: []time.Duration{0},
			wantEvicted: []string{"burstable"}, wantPressure: true, wantGrace: i64(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, eviction.Config{Thresholds: thresholds(t, tc.hard, tc.soft, tc.grace, ""), MaxPodGracePeriodSeconds: tc.maxGrace}, memoryPods...)
			e.node.memAvail, e.node.memWS = tc.avail, 8*gi-tc.avail
			var evicted []string
			for _, d := range tc.steps {
				evicted = append(evicted, names(e.sync(t, d))...)
			}
			assert.Equal(t, tc.wantEvicted, evicted)
			assert.Equal(t, tc.wantEvicted, e.kill.names())
			assert.Equal(t, tc.wantPressure, e.m.MemoryPressure())
			assert.False(t, e.m.DiskPressure() || e.m.PIDPressure(), "only memory pressure")
			if len(tc.wantEvicted) > 0 {
				assert.Equal(t, tc.wantGrace, e.kill.last().opts.GracePeriodSeconds)
			}
		})
	}
}

func i64(v int64) *int64 { return &v }

func TestEvictedPodStatus(t *testing.T) {
	e := newEnv(t, eviction.Config{Thresholds: thresholds(t, "memory.available<1Gi", "", "", "")}, memoryPods...)
	e.node.memAvail, e.node.memWS = 500*mi, 7692*mi
	require.Len(t, e.sync(t, 0), 1)
	k := e.kill.last()
	want := "The node was low on resource: memory. Threshold quantity: 1Gi, available: 500Mi. " +
		"Container c was using 500Mi, request is 100Mi, has larger consumption of memory. "
	assert.Equal(t, want, k.opts.Message)
	st := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	k.opts.UpdateStatus(&st)
	assert.Equal(t, v1.PodFailed, st.Phase)
	assert.Equal(t, "Evicted", st.Reason)
	assert.Equal(t, want, st.Message)
	require.Len(t, st.Conditions, 2)
	assert.Equal(t, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "TerminationByKubelet", Message: want}, st.Conditions[1])
}

func TestDiskEvictionMessage(t *testing.T) {
	e := newEnv(t, eviction.Config{Thresholds: thresholds(t, "nodefs.available<10Gi", "", "", "")},
		podSpec{name: "writer", storReq: "1Gi", rootfs: 3 * gi, logs: gi}, podSpec{name: "quiet", rootfs: mi})
	e.node.imageFs = nil
	e.node.nodeFs.avail = 5 * gi
	require.Equal(t, []string{"writer"}, names(e.sync(t, 0)))
	assert.Equal(t, "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 5Gi. "+
		"Container c was using 4Gi, request is 1Gi, has larger consumption of ephemeral-storage. ", e.kill.last().opts.Message)
	assert.True(t, e.m.DiskPressure())
}

func TestRanking(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hard  string
		setup func(n *node)
		pods  []podSpec
		want  []string // eviction order, one per pass
	}{
		{name: "memory: over request first, then lower priority, then usage above request",
			hard:  "memory.available<1Gi",
			setup: func(n *node) { n.memAvail, n.memWS = 500*mi, 7692*mi },
			pods: []podSpec{
				{name: "within-request", memReq: "1Gi", memUsed: 900 * mi},
				{name: "over-high-prio", priority: 100, memReq: "100Mi", memUsed: 2000 * mi},
				{name: "over-small", memReq: "100Mi", memUsed: 200 * mi},
				{name: "over-big", memReq: "100Mi", memUsed: 1000 * mi},
				{name: "no-stats", noStats: true},
			},
			want: []string{"no-stats", "over-big", "over-small", "over-high-prio", "within-request"}},
		{name: "PIDs: lower priority first, then more processes",
			hard:  "pid.available<500",
			setup: func(n *node) { n.procs = 9800 },
			pods: []podSpec{
				{name: "many-high-prio", priority: 10, procs: 5000},
				{name: "few", procs: 10},
				{name: "many", procs: 3000},
			},
			want: []string{"many", "few", "many-high-prio"}},
		{name: "nodefs without imagefs: over ephemeral-storage request first, writable layer, logs and local volumes counted",
			hard:  "nodefs.available<10Gi",
			setup: func(n *node) { n.imageFs = nil; n.nodeFs.avail = 5 * gi },
			pods: []podSpec{
				{name: "within-request", storReq: "10Gi", rootfs: 5 * gi},
				{name: "volume", volume: 3 * gi},
				{name: "layer", rootfs: gi, logs: gi},
				{name: "high-prio", priority: 5, rootfs: 9 * gi},
			},
			want: []string{"volume", "layer", "high-prio", "within-request"}},
		{name: "nodefs with a dedicated imagefs: logs and local volumes only",
			hard:  "nodefs.available<10Gi",
			setup: func(n *node) { n.imageFs = &fsNums{200 * gi, 100 * gi, 1e6, 5e5}; n.nodeFs.avail = 5 * gi },
			pods: []podSpec{
				{name: "layer", rootfs: 9 * gi},
				{name: "logs", logs: 2 * gi},
				{name: "volume", volume: 3 * gi},
			},
			want: []string{"volume", "logs", "layer"}},
		{name: "imagefs dedicated: writable layers only",
			hard:  "imagefs.available<10Gi",
			setup: func(n *node) { n.imageFs = &fsNums{200 * gi, 5 * gi, 1e6, 5e5} },
			pods: []podSpec{
				{name: "volume", volume: 9 * gi},
				{name: "layer", rootfs: 2 * gi},
			},
			want: []string{"layer", "volume"}},
		{name: "nodefs inodes: inodes used",
			hard:  "nodefs.inodesFree<1000",
			setup: func(n *node) { n.imageFs = nil; n.nodeFs.free = 10 },
			pods: []podSpec{
				{name: "few", inodes: 10},
				{name: "many", inodes: 5000},
			},
			want: []string{"many", "few"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, eviction.Config{Thresholds: thresholds(t, tc.hard, "", "", ""), ImageGC: eviction.ReclaimFunc(func(context.Context) error { return nil })}, tc.pods...)
			e.node.set(tc.setup)
			for range tc.want {
				require.Len(t, e.sync(t, 10*time.Second), 1)
				// the evicted pod is gone from the active pods
				last := e.kill.last().pod
				for i, p := range e.pods {
					if p == last {
						e.pods = append(e.pods[:i:i], e.pods[i+1:]...)
						break
					}
				}
			}
			assert.Equal(t, tc.want, e.kill.names())
		})
	}
}

func TestCriticalPodsAreNotEvicted(t *testing.T) {
	e := newEnv(t, eviction.Config{Thresholds: thresholds(t, "memory.available<1Gi", "", "", "")},
		podSpec{name: "static", memUsed: 3 * gi, static: true},
		podSpec{name: "mirror", memUsed: 3 * gi, mirror: true},
		podSpec{name: "system-critical", priority: 2000000000, memUsed: 3 * gi},
		podSpec{name: "user", memUsed: 100 * mi, priority: 2000000001 - 2000000000})
	e.node.memAvail, e.node.memWS = 500*mi, 7692*mi
	assert.Equal(t, []string{"user"}, names(e.sync(t, 0)))

	e.pods = e.pods[:3]
	assert.Empty(t, e.sync(t, 10*time.Second), "only critical pods left: none evicted")
	assert.Equal(t, []string{"user"}, e.kill.names())
}

func TestNodeLevelReclaim(t *testing.T) {
	for _, tc := range []struct {
		name         string
		hard         string
		freeTo       uint64 // nodefs available after GC
		wantEvicted  []string
		wantGCCalled bool
	}{
		{name: "reclaim frees enough: no pod evicted", hard: "nodefs.available<10Gi", freeTo: 20 * gi, wantGCCalled: true},
		{name: "reclaim frees too little: a pod is evicted", hard: "nodefs.available<10Gi", freeTo: 8 * gi, wantGCCalled: true, wantEvicted: []string{"writer"}},
		{name: "reclaim frees the threshold but not the minimum reclaim: a pod is evicted", hard: "nodefs.available<10Gi",
			freeTo: 11 * gi, wantGCCalled: true, wantEvicted: []string{"writer"}},
		{name: "memory pressure does not reclaim disk", hard: "memory.available<1Gi", freeTo: 50 * gi, wantEvicted: []string{"writer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, eviction.Config{Thresholds: thresholds(t, tc.hard, "", "", "nodefs.available=2Gi")},
				podSpec{name: "writer", rootfs: 3 * gi, memUsed: gi})
			e.node.set(func(n *node) { n.imageFs, n.nodeFs.avail, n.memAvail, n.memWS = nil, 5*gi, 500*mi, 7692*mi })
			if tc.hard != "memory.available<1Gi" {
				e.node.memAvail = 4 * gi
			}
			e.gc.free = func() { e.node.set(func(n *node) { n.nodeFs.avail = tc.freeTo }) }
			assert.Equal(t, tc.wantEvicted, names(e.sync(t, 0)))
			assert.Equal(t, tc.wantGCCalled, e.gc.images == 1 && e.gc.container == 1, "image and container GC ran")
		})
	}
}

func TestMinimumReclaim(t *testing.T) {
	e := newEnv(t, eviction.Config{Thresholds: thresholds(t, "memory.available<1Gi", "", "", "memory.available=500Mi")}, memoryPods...)
	e.node.memAvail, e.node.memWS = 500*mi, 7692*mi
	assert.Len(t, e.sync(t, 0), 1)

	// Above the threshold, below threshold plus minimum reclaim: still met.
	e.node.set(func(n *node) { n.memAvail = 1200 * mi })
	assert.Len(t, e.sync(t, 10*time.Second), 1, "threshold kept until its minimum reclaim")
	assert.True(t, e.m.MemoryPressure())

	e.node.set(func(n *node) { n.memAvail = 1600 * mi })
	assert.Empty(t, e.sync(t, 10*time.Second), "minimum reclaim reached")
}

func TestPressureTransitionPeriod(t *testing.T) {
	e := newEnv(t, eviction.Config{Thresholds: thresholds(t, "memory.available<1Gi,nodefs.available<10Gi,pid.available<100", "", "", ""),
		PressureTransitionPeriod: 5 * time.Minute})
	e.node.set(func(n *node) { n.memAvail, n.nodeFs.avail, n.imageFs, n.procs = 500*mi, 5*gi, nil, 9950 })
	e.sync(t, 0)
	assert.Equal(t, "mem=true disk=true pid=true", pressure(e.m))

	e.node.set(func(n *node) { n.memAvail, n.nodeFs.avail, n.procs = 4*gi, 50*gi, 100 })
	e.sync(t, 10*time.Second)
	assert.Equal(t, "mem=true disk=true pid=true", pressure(e.m), "conditions stay within the transition period")
	e.sync(t, 4*time.Minute)
	assert.Equal(t, "mem=true disk=true pid=true", pressure(e.m))
	e.sync(t, time.Minute)
	assert.Equal(t, "mem=false disk=false pid=false", pressure(e.m), "5m after the last observation")
}

func TestStaleStatsEvictOnce(t *testing.T) {
	e := newEnv(t, eviction.Config{Thresholds: thresholds(t, "memory.available<1Gi", "", "", "")}, memoryPods...)
	at := e.clock.Now()
	e.node.stamp = func() time.Time { return at }
	e.node.memAvail, e.node.memWS = 500*mi, 7692*mi
	assert.Len(t, e.sync(t, 0), 1)
	assert.Empty(t, e.sync(t, 10*time.Second), "same stats: no second eviction")
	assert.True(t, e.m.MemoryPressure())
	at = at.Add(10 * time.Second)
	assert.Len(t, e.sync(t, 0), 1, "fresh stats: evicts again")
}

func TestSummaryErrorEvictsNothing(t *testing.T) {
	e := newEnv(t, eviction.Config{Thresholds: thresholds(t, "memory.available<1Gi", "", "", "")}, memoryPods...)
	e.node.err = errors.New("no stats")
	assert.Empty(t, e.sync(t, 0))
	assert.False(t, e.m.MemoryPressure())
}

func TestAllocatableMemory(t *testing.T) {
	ts, err := eviction.ParseThresholdConfig(true, map[string]string{"memory.available": "1Gi"}, nil, nil, nil)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	assert.Equal(t, eviction.SignalAllocatableMemoryAvailable, ts[1].Signal)
}

func TestContainerFsThresholds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		imageFs *fsNums
		want    string
	}{
		{"one file system: nodefs's", nil, "containerfs.available<10%"},
		{"dedicated imagefs: imagefs's", &fsNums{200 * gi, 100 * gi, 2e6, 1e6}, "containerfs.available<15%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, eviction.Config{Thresholds: thresholds(t, "nodefs.available<10%,imagefs.available<15%,containerfs.available<1%", "", "", "")})
			e.node.imageFs = tc.imageFs
			e.sync(t, 0)
			var got []string
			for _, th := range e.m.Thresholds() {
				if th.Signal == eviction.SignalContainerFsAvailable {
					got = append(got, th.String())
				}
			}
			assert.Equal(t, []string{tc.want}, got, "configured containerfs threshold replaced")
		})
	}
}

func TestAdmit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		setup     func(n *node)
		pod       podSpec
		wantAdmit bool
		wantMsg   string
	}{
		{name: "no pressure admits a BestEffort pod", pod: podSpec{name: "be"}, wantAdmit: true},
		{name: "memory pressure refuses a BestEffort pod", setup: func(n *node) { n.memAvail = 500 * mi },
			pod: podSpec{name: "be"}, wantMsg: "The node had condition: [MemoryPressure]. "},
		{name: "memory pressure admits a BestEffort pod tolerating memory-pressure", setup: func(n *node) { n.memAvail = 500 * mi },
			pod: podSpec{name: "be", tolerates: true}, wantAdmit: true},
		{name: "memory pressure admits a Burstable pod", setup: func(n *node) { n.memAvail = 500 * mi },
			pod: podSpec{name: "bu", memReq: "10Mi"}, wantAdmit: true},
		{name: "disk pressure refuses a Burstable pod", setup: func(n *node) { n.imageFs, n.nodeFs.avail = nil, gi },
			pod: podSpec{name: "bu", memReq: "10Mi"}, wantMsg: "The node had condition: [DiskPressure]. "},
		{name: "memory and disk pressure refuse a tolerating pod", setup: func(n *node) { n.memAvail, n.imageFs, n.nodeFs.avail = 500*mi, nil, gi },
			pod: podSpec{name: "be", tolerates: true}, wantMsg: "The node had condition: [MemoryPressure DiskPressure]. "},
		{name: "PID pressure refuses a Guaranteed pod", setup: func(n *node) { n.procs = 9999 },
			pod: podSpec{name: "g", memReq: "1Gi", memLim: "1Gi"}, wantMsg: "The node had condition: [PIDPressure]. "},
		{name: "disk pressure admits a static pod", setup: func(n *node) { n.imageFs, n.nodeFs.avail = nil, gi },
			pod: podSpec{name: "s", static: true}, wantAdmit: true},
		{name: "disk pressure admits a system-critical pod", setup: func(n *node) { n.imageFs, n.nodeFs.avail = nil, gi },
			pod: podSpec{name: "c", priority: 2000001000}, wantAdmit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, eviction.Config{Thresholds: thresholds(t, "memory.available<1Gi,nodefs.available<10Gi,pid.available<100", "", "", "")})
			if tc.setup != nil {
				e.node.set(tc.setup)
			}
			e.sync(t, 0)
			pod, _ := makePod(tc.pod)
			r := e.m.Admit(&admission.PodAdmitAttributes{Pod: pod})
			assert.Equal(t, tc.wantAdmit, r.Admit)
			if !tc.wantAdmit {
				assert.Equal(t, "Evicted", r.Reason)
				assert.Equal(t, tc.wantMsg, r.Message)
			}
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	ok := eviction.Config{Summary: &node{}, ActivePods: func() []*v1.Pod { return nil }, Killer: &killer{}}
	for name, mut := range map[string]func(c *eviction.Config){
		"no summary":        func(c *eviction.Config) { c.Summary = nil },
		"no active pods":    func(c *eviction.Config) { c.ActivePods = nil },
		"no killer":         func(c *eviction.Config) { c.Killer = nil },
		"unknown signal":    func(c *eviction.Config) { c.Thresholds = []eviction.Threshold{{Signal: "swap.available"}} },
		"negative interval": func(c *eviction.Config) { c.MonitoringInterval = -1 },
		"negative grace": func(c *eviction.Config) {
			c.Thresholds = []eviction.Threshold{{Signal: "memory.available", GracePeriod: -1}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := ok
			mut(&c)
			_, err := eviction.New(c)
			assert.ErrorIs(t, err, eviction.ErrInvalidConfig)
		})
	}
	m, err := eviction.New(ok)
	require.NoError(t, err)
	assert.Len(t, m.Thresholds(), 4, "the kubelet's default hard thresholds")
}
