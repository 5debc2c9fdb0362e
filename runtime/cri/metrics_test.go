package cri_test

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

func TestRuntimeOperationMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	opts, err := cri.MetricsDialOptions(reg)
	require.NoError(t, err)
	e := newFakeEnv(t, func(c *cri.Config) { c.DialOptions = append(c.DialOptions, opts...) })

	pod := newPod("metrics", "busybox:1")
	st := e.status(t, pod)
	require.NoError(t, e.m.SyncPod(e.ctx, pod, st, nil, nil).Error())

	e.srv.FailNext("ListPodSandbox", errors.New("runtime is down"))
	_, err = e.m.GetPods(e.ctx, true)
	require.Error(t, err)

	count := func(name, op string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetValue() == op {
						if h := m.GetHistogram(); h != nil {
							return float64(h.GetSampleCount())
						}
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	assert.Equal(t, float64(e.srv.Calls("RunPodSandbox")), count("kubelet_runtime_operations_total", "run_podsandbox"))
	assert.Equal(t, 1.0, count("kubelet_runtime_operations_total", "run_podsandbox"), "SyncPod created one sandbox")
	assert.Equal(t, float64(e.srv.Calls("CreateContainer")), count("kubelet_runtime_operations_total", "create_container"))
	assert.Equal(t, 1.0, count("kubelet_runtime_operations_duration_seconds", "start_container"))
	assert.Equal(t, 1.0, count("kubelet_run_podsandbox_duration_seconds", ""), "by the default runtime handler")
	assert.Equal(t, 1.0, count("kubelet_runtime_operations_errors_total", "list_podsandbox"), "the failed listing")
	assert.Equal(t, 0.0, count("kubelet_runtime_operations_errors_total", "run_podsandbox"))
	assert.Equal(t, 1, testutil.CollectAndCount(reg, "kubelet_run_podsandbox_duration_seconds"))

	_, err = cri.MetricsDialOptions(reg)
	assert.ErrorIs(t, err, runtime.ErrInvalidConfig, "registered twice")
	_, err = cri.MetricsDialOptions(nil)
	assert.ErrorIs(t, err, runtime.ErrInvalidConfig)
}
