package stats

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The kubelet's resource metrics (pkg/kubelet/metrics/collectors), with
// the help texts its metrics framework annotates with their stability.
// scrape_error, deprecated since 1.29, is hidden by the v1.37 kubelet and
// left out here too.
var (
	nodeCPUUsageDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryUsageDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"[STABLE] Current working set of the node in bytes", nil, nil)
	nodeSwapUsageDesc = prometheus.NewDesc("node_swap_usage_bytes",
		"[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", nil, nil)
	containerCPUUsageDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemoryUsageDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"[STABLE] Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	containerSwapUsageDesc = prometheus.NewDesc("container_swap_usage_bytes",
		"[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems", []string{"container", "pod", "namespace"}, nil)
	containerSwapLimitDesc = prometheus.NewDesc("container_swap_limit_bytes",
		"[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems", []string{"container", "pod", "namespace"}, nil)
	podCPUUsageDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemoryUsageDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"[STABLE] Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	podSwapUsageDesc = prometheus.NewDesc("pod_swap_usage_bytes",
		"[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems", []string{"pod", "namespace"}, nil)
	resourceScrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
	containerStartTimeDesc = prometheus.NewDesc("container_start_time_seconds",
		"[STABLE] Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
)

// SummaryFunc returns a summary with CPU and memory at least, such as
// Provider.GetCPUAndMemoryStats or a virtual-kubelet provider's
// GetStatsSummary.
type SummaryFunc func(context.Context) (*statsapi.Summary, error)

// NewResourceCollector returns the kubelet's /metrics/resource collector
// over get, which it calls on every scrape (with a background context).
// Only what exists now is collected: a pod gone is gone from the next
// scrape.
func NewResourceCollector(get SummaryFunc) prometheus.Collector {
	return &resourceCollector{ctx: context.Background(), get: get}
}

// GatherResourceMetrics is one scrape of the resource metrics over get,
// with ctx: what /metrics/resource serves, in virtual-kubelet's
// GetMetricsResource shape.
func GatherResourceMetrics(ctx context.Context, get SummaryFunc) ([]*dto.MetricFamily, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(&resourceCollector{ctx: ctx, get: get}); err != nil {
		return nil, err
	}
	return reg.Gather()
}

// GetMetricsResource is GatherResourceMetrics over GetCPUAndMemoryStats.
func (p *Provider) GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	return GatherResourceMetrics(ctx, p.GetCPUAndMemoryStats)
}

type resourceCollector struct {
	ctx context.Context
	get SummaryFunc
}

func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUUsageDesc, nodeMemoryUsageDesc, nodeSwapUsageDesc, containerStartTimeDesc,
		containerCPUUsageDesc, containerMemoryUsageDesc, containerSwapUsageDesc, containerSwapLimitDesc,
		podCPUUsageDesc, podMemoryUsageDesc, podSwapUsageDesc, resourceScrapeErrorDesc} {
		ch <- d
	}
}

func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	s, err := c.get(c.ctx)
	failed := 0.0
	if err != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, failed)
	if err != nil {
		return
	}
	emit := func(t metav1.Time, d *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(t.Time, prometheus.MustNewConstMetric(d, typ, v, labels...))
	}
	n := s.Node
	if n.CPU != nil && n.CPU.UsageCoreNanoSeconds != nil {
		emit(n.CPU.Time, nodeCPUUsageDesc, prometheus.CounterValue, seconds(*n.CPU.UsageCoreNanoSeconds))
	}
	if n.Memory != nil && n.Memory.WorkingSetBytes != nil {
		emit(n.Memory.Time, nodeMemoryUsageDesc, prometheus.GaugeValue, float64(*n.Memory.WorkingSetBytes))
	}
	if n.Swap != nil && n.Swap.SwapUsageBytes != nil {
		emit(n.Swap.Time, nodeSwapUsageDesc, prometheus.GaugeValue, float64(*n.Swap.SwapUsageBytes))
	}
	for _, pod := range s.Pods {
		name, ns := pod.PodRef.Name, pod.PodRef.Namespace
		for _, ctr := range pod.Containers {
			if ctr.StartTime.Unix() > 0 {
				ch <- prometheus.MustNewConstMetric(containerStartTimeDesc, prometheus.GaugeValue,
					float64(ctr.StartTime.UnixNano())/float64(time.Second), ctr.Name, name, ns)
			}
			if ctr.CPU != nil && ctr.CPU.UsageCoreNanoSeconds != nil {
				emit(ctr.CPU.Time, containerCPUUsageDesc, prometheus.CounterValue, seconds(*ctr.CPU.UsageCoreNanoSeconds), ctr.Name, name, ns)
			}
			if ctr.Memory != nil && ctr.Memory.WorkingSetBytes != nil {
				emit(ctr.Memory.Time, containerMemoryUsageDesc, prometheus.GaugeValue, float64(*ctr.Memory.WorkingSetBytes), ctr.Name, name, ns)
			}
			if sw := ctr.Swap; sw != nil {
				if sw.SwapUsageBytes != nil {
					emit(sw.Time, containerSwapUsageDesc, prometheus.GaugeValue, float64(*sw.SwapUsageBytes), ctr.Name, name, ns)
				}
				if sw.SwapAvailableBytes != nil {
					emit(sw.Time, containerSwapLimitDesc, prometheus.GaugeValue, float64(*sw.SwapAvailableBytes+deref(sw.SwapUsageBytes)), ctr.Name, name, ns)
				}
			}
		}
		if pod.CPU != nil && pod.CPU.UsageCoreNanoSeconds != nil {
			emit(pod.CPU.Time, podCPUUsageDesc, prometheus.CounterValue, seconds(*pod.CPU.UsageCoreNanoSeconds), name, ns)
		}
		if pod.Memory != nil && pod.Memory.WorkingSetBytes != nil {
			emit(pod.Memory.Time, podMemoryUsageDesc, prometheus.GaugeValue, float64(*pod.Memory.WorkingSetBytes), name, ns)
		}
		if pod.Swap != nil && pod.Swap.SwapUsageBytes != nil {
			emit(pod.Swap.Time, podSwapUsageDesc, prometheus.GaugeValue, float64(*pod.Swap.SwapUsageBytes), name, ns)
		}
	}
}

func seconds(nanos uint64) float64 { return float64(nanos) / float64(time.Second) }
