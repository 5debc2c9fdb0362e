package stats_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/stats"
)

func TestResourceCollector(t *testing.T) {
	ts := metav1.NewTime(t0) // 1767225600000 ms
	summary := &statsapi.Summary{
		Node: statsapi.NodeStats{
			NodeName: "node-1",
			CPU:      &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: ptr(uint64(12.5e9))},
			Memory:   &statsapi.MemoryStats{Time: ts, WorkingSetBytes: ptr(uint64(1 << 30))},
			Swap:     &statsapi.SwapStats{Time: ts, SwapUsageBytes: ptr(uint64(0))},
		},
		Pods: []statsapi.PodStats{{
			PodRef: statsapi.PodReference{Name: "web", Namespace: "default", UID: "u"},
			CPU:    &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: ptr(uint64(2e9))},
			Memory: &statsapi.MemoryStats{Time: ts, WorkingSetBytes: ptr(uint64(300))},
			Containers: []statsapi.ContainerStats{
				{Name: "app", StartTime: ts, CPU: &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: ptr(uint64(1.5e9))},
					Memory: &statsapi.MemoryStats{Time: ts, WorkingSetBytes: ptr(uint64(200))},
					Swap:   &statsapi.SwapStats{Time: ts, SwapUsageBytes: ptr(uint64(5)), SwapAvailableBytes: ptr(uint64(10))}},
				{Name: "no-stats"},
			},
		}},
	}
	for _, tc := range []struct {
		name string
		get  stats.SummaryFunc
		want string
	}{
		{"the kubelet's names, help and labels, with the samples' times", func(context.Context) (*statsapi.Summary, error) { return summary, nil }, `
# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 1.5 1767225600000
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 200 1767225600000
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web"} 1.7672256e+09
# HELP container_swap_limit_bytes [ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems
# TYPE container_swap_limit_bytes gauge
container_swap_limit_bytes{container="app",namespace="default",pod="web"} 15 1767225600000
# HELP container_swap_usage_bytes [ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems
# TYPE container_swap_usage_bytes gauge
container_swap_usage_bytes{container="app",namespace="default",pod="web"} 5 1767225600000
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 12.5 1767225600000
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1.073741824e+09 1767225600000
# HELP node_swap_usage_bytes [ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems
# TYPE node_swap_usage_bytes gauge
node_swap_usage_bytes 0 1767225600000
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 2 1767225600000
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="default",pod="web"} 300 1767225600000
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`},
		{"a failed summary is a scrape error alone", func(context.Context) (*statsapi.Summary, error) { return nil, errors.New("boom") }, `
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 1
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.NoError(t, testutil.CollectAndCompare(stats.NewResourceCollector(tc.get), strings.NewReader(tc.want)))
			mfs, err := stats.GatherResourceMetrics(context.Background(), tc.get)
			require.NoError(t, err)
			assert.NotEmpty(t, mfs)
		})
	}
}
