package stats

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	fixtureUID = "0b9d6c1e-1111-2222-3333-444455556666"
	fixtureCID = "abc123"
)

func u64(v uint64) *uint64 { return &v }

func TestRates(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type read struct {
		at     time.Duration
		nanos  uint64
		update bool
		want   *uint64
	}
	for _, tc := range []struct {
		name  string
		reads []read
	}{
		{"first sample has no rate", []read{{0, 1e9, true, nil}}},
		{"two updates give the rate between them", []read{{0, 1e9, true, nil}, {10 * time.Second, 6e9, true, u64(5e8)}}},
		{"a read without update returns the last rate", []read{{0, 0, true, nil}, {2 * time.Second, 4e9, true, u64(2e9)}, {3 * time.Second, 9e9, false, u64(2e9)}}},
		{"a read without update takes no sample", []read{{0, 0, true, nil}, {time.Second, 5e9, false, nil}, {2 * time.Second, 2e9, true, u64(1e9)}}},
		{"a counter going back restarts", []read{{0, 5e9, true, nil}, {time.Second, 1e9, true, nil}, {2 * time.Second, 2e9, true, u64(1e9)}}},
		{"the same sample again keeps the rate", []read{{0, 0, true, nil}, {time.Second, 1e9, true, u64(1e9)}, {time.Second, 1e9, true, u64(1e9)}}},
		{"a sample older than the last restarts", []read{{5 * time.Second, 0, true, nil}, {time.Second, 1e9, true, nil}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRates(clocktesting.NewFakePassiveClock(t0))
			for i, rd := range tc.reads {
				got := r.rate("k", t0.Add(rd.at), rd.nanos, rd.update)
				assert.Equal(t, rd.want, got, "read %d", i)
			}
		})
	}
}

func TestRatesForgetOldSamples(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	r := newRates(clk)
	r.rate("gone", t0, 0, true)
	r.rate("gone", t0.Add(time.Second), 1e9, true)
	clk.SetTime(t0.Add(cpuSampleTTL + 2*time.Second))
	r.sweep()
	assert.Nil(t, r.rate("gone", t0, 0, false), "a sample older than the TTL is forgotten")
}

func TestCgroupRead(t *testing.T) {
	v1Pod := "/kubepods/burstable/pod" + fixtureUID
	v2Pod := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b9d6c1e_1111_2222_3333_444455556666.slice"
	for _, tc := range []struct {
		name, mount, path string
		v2                bool
		want              cgroupSample
	}{
		{"v1 root: usage less total_inactive_file, no limit", "testdata/cgroupv1", "/", false, cgroupSample{
			cpuNanos: u64(200e9), usage: u64(4e9), workingSet: u64(3e9), rss: u64(2e9), pgfault: u64(300), pgmajfault: u64(3)}},
		{"v1 pod with a limit and pids", "testdata/cgroupv1", v1Pod, false, cgroupSample{
			cpuNanos: u64(2e9), usage: u64(3e8), workingSet: u64(2.5e8), rss: u64(2e8), pgfault: u64(40), pgmajfault: u64(1), limit: u64(512 << 20), pids: u64(7)}},
		{"v2 root has CPU only", "testdata/cgroupv2", "/", true, cgroupSample{cpuNanos: u64(150e9)}},
		{"v2 pod: usage_usec in nanoseconds, anon as RSS", "testdata/cgroupv2", v2Pod, true, cgroupSample{
			cpuNanos: u64(2e9), usage: u64(3e8), workingSet: u64(2.5e8), rss: u64(2e8), pgfault: u64(40), pgmajfault: u64(1), limit: u64(512 << 20), pids: u64(7)}},
		{"v2 container: memory.max \"max\" is no limit", "testdata/cgroupv2", v2Pod + "/cri-containerd-" + fixtureCID + ".scope", true, cgroupSample{
			cpuNanos: u64(1.5e9), usage: u64(2.5e8), workingSet: u64(2.1e8), rss: u64(1.8e8), pgfault: u64(30), pgmajfault: u64(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg := newCgroups(tc.mount)
			require.Equal(t, tc.v2, cg.v2, "version detected from cgroup.controllers")
			got, err := cg.read(tc.path)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := newCgroups("testdata/cgroupv1").read("/nope")
	assert.Error(t, err, "a missing cgroup is an error")
}

func TestFindPodCgroups(t *testing.T) {
	for _, tc := range []struct{ name, mount, root, want string }{
		{"cgroupfs pod<uid> under its QoS class", "testdata/cgroupv1", "/kubepods", "/kubepods/burstable/pod" + fixtureUID},
		{"systemd slice with _ for -", "testdata/cgroupv2", "/kubepods.slice",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b9d6c1e_1111_2222_3333_444455556666.slice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg := newCgroups(tc.mount)
			got := cg.findPodCgroups(tc.root)
			assert.Equal(t, map[string]string{fixtureUID: tc.want}, got)
			c, ok := cg.containerCgroup(tc.want, fixtureCID)
			assert.True(t, ok, "container cgroup found by ID")
			assert.Contains(t, c, fixtureCID)
		})
	}
}

func TestProcReaders(t *testing.T) {
	mi, err := readMeminfo("testdata/proc")
	require.NoError(t, err)
	assert.Equal(t, uint64(8000000*1024), mi["MemTotal"], "kB converted to bytes")
	boot, cpu, err := procStat("testdata/proc")
	require.NoError(t, err)
	assert.Equal(t, time.Unix(1700000000, 0), boot)
	assert.Equal(t, u64(15e9), cpu, "user+system ticks at 100 Hz; idle and iowait left out")
	maxPID, procs := rlimit("testdata/proc")
	assert.Equal(t, int64(63382), *maxPID, "the smaller of pid_max and threads-max")
	assert.Equal(t, int64(345), *procs, "total tasks of /proc/loadavg")
	_, err = readMeminfo("testdata/nope")
	assert.Error(t, err)
}
