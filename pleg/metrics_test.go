package pleg

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodekit/nodekit/runtime"
)

func TestRelistMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	tp := newTestPLEG(t, func(c *Config) {
		c.Registerer = reg
		c.EventChannelCapacity = 2
	})
	running := &runtime.Container{ID: cid("sb1"), State: cRunning}
	p1 := pod("1", ctr("a", cRunning), ctr("b", cExited))
	p1.Sandboxes = []*runtime.Container{running}
	tp.lister.setPods(p1, pod("2", ctr("c", cCreated), ctr("d", cUnknown), ctr("e", cRunning)))
	tp.relist(t) // events: a started, b died, e started, sandbox started: two do not fit

	assert.Equal(t, 1, testutil.CollectAndCount(reg, "kubelet_pleg_relist_duration_seconds"))
	assert.Equal(t, 2.0, testutil.ToFloat64(tp.metrics.discard), "events that did not fit are discarded events")
	assert.Equal(t, 1.0, testutil.ToFloat64(tp.metrics.runningPods), "one pod has a running sandbox")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kubelet_running_containers Number of containers currently running
# TYPE kubelet_running_containers gauge
kubelet_running_containers{container_state="created"} 1
kubelet_running_containers{container_state="exited"} 1
kubelet_running_containers{container_state="running"} 2
kubelet_running_containers{container_state="unknown"} 1
# HELP kubelet_pleg_last_seen_seconds Timestamp in seconds when PLEG was last seen active.
# TYPE kubelet_pleg_last_seen_seconds gauge
kubelet_pleg_last_seen_seconds 1.7672256e+09
`), "kubelet_running_containers", "kubelet_pleg_last_seen_seconds"))
	assert.Equal(t, uint64(0), histCount(t, reg, "kubelet_pleg_relist_interval_seconds"), "no interval before the second relist")

	drain(tp.Watch())
	tp.clock.Step(3 * time.Second)
	tp.lister.setPods()
	tp.relist(t)
	assert.Equal(t, uint64(2), histCount(t, reg, "kubelet_pleg_relist_duration_seconds"))
	assert.Equal(t, uint64(1), histCount(t, reg, "kubelet_pleg_relist_interval_seconds"))
	assert.Equal(t, 3.0, histSum(t, reg, "kubelet_pleg_relist_interval_seconds"), "the interval runs from relist start to relist start")
	assert.Equal(t, 0.0, testutil.ToFloat64(tp.metrics.runningPods), "every pod is gone")
	assert.Equal(t, 0.0, testutil.ToFloat64(tp.metrics.running))

	// A failed listing counts as a relist but changes neither the interval
	// nor the last-seen time.
	tp.clock.Step(time.Second)
	tp.lister.mu.Lock()
	tp.lister.listErr = errors.New("runtime down")
	tp.lister.mu.Unlock()
	require.Error(t, tp.Relist(context.Background()))
	assert.Equal(t, uint64(3), histCount(t, reg, "kubelet_pleg_relist_duration_seconds"))
	assert.Equal(t, uint64(1), histCount(t, reg, "kubelet_pleg_relist_interval_seconds"))
	assert.Equal(t, float64(tp.clock.Now().Add(-time.Second).Unix()), testutil.ToFloat64(tp.metrics.lastSeen))
}

func TestMetricsRegisteredTwiceIsAConfigError(t *testing.T) {
	reg := prometheus.NewRegistry()
	newTestPLEG(t, func(c *Config) { c.Registerer = reg })
	_, err := New(Config{Runtime: &scriptedLister{}, Cache: runtime.NewCache(), Registerer: reg})
	require.ErrorIs(t, err, runtime.ErrInvalidConfig)
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Equal(t, 5+4, n, "the first PLEG's five metrics and four container states, as they were")
}

func TestNoRegistererRegistersNothing(t *testing.T) {
	tp := newTestPLEG(t, nil)
	assert.Nil(t, tp.metrics)
	tp.relist(t)
}

func TestEventedConnectionMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f := newEventedFixtureWith(t, reg)
	defer f.stop()
	require.Eventually(t, f.e.Streaming, guard, time.Millisecond)
	assert.Equal(t, 1.0, testutil.ToFloat64(f.e.metrics.conns), "the stream opened once")

	pod := podSpec("uid-m", "app")
	require.NoError(t, f.rt.SyncPod(context.Background(), pod, nil, nil, nil).Error())
	recv(t, f.e.Watch(), "ContainerStarted from the stream")
	assert.NotZero(t, histCount(t, reg, "kubelet_evented_pleg_connection_latency_seconds"), "each streamed event's latency is observed")

	f.rt.BreakContainerEvents()
	f.stepUntil(t, func() bool { return testutil.ToFloat64(f.e.metrics.conns) == 2 })
	assert.Equal(t, 0.0, testutil.ToFloat64(f.e.metrics.connErrs))
}

func histCount(t *testing.T, g prometheus.Gatherer, name string) uint64 {
	t.Helper()
	return histogram(t, g, name).GetSampleCount()
}

func histSum(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	return histogram(t, g, name).GetSampleSum()
}

func histogram(t *testing.T, g prometheus.Gatherer, name string) interface {
	GetSampleCount() uint64
	GetSampleSum() float64
} {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			require.Len(t, mf.GetMetric(), 1)
			return mf.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatalf("metric %s not gathered", name)
	return nil
}
