package cri

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/promutil"
	"github.com/nodekit/nodekit/runtime"
)

// operationTypes maps CRI methods to the kubelet's operation_type labels
// (its instrumented runtime and image services).
var operationTypes = map[string]string{
	"Version": "version", "Status": "status", "RuntimeConfig": "runtime_config",
	"RunPodSandbox": "run_podsandbox", "StopPodSandbox": "stop_podsandbox", "RemovePodSandbox": "remove_podsandbox",
	"PodSandboxStatus": "podsandbox_status", "ListPodSandbox": "list_podsandbox",
	"CreateContainer": "create_container", "StartContainer": "start_container", "StopContainer": "stop_container",
	"RemoveContainer": "remove_container", "ListContainers": "list_containers", "ContainerStatus": "container_status",
	"UpdateContainerResources": "update_container", "ReopenContainerLog": "reopen_container_log",
	"ExecSync": "exec_sync", "Exec": "exec", "Attach": "attach", "PortForward": "port_forward",
	"ContainerStats": "container_stats", "ListContainerStats": "list_container_stats",
	"PodSandboxStats": "podsandbox_stats", "ListPodSandboxStats": "list_podsandbox_stats",
	"UpdateRuntimeConfig": "update_runtime_config", "CheckpointContainer": "checkpoint_container",
	"GetContainerEvents": "get_container_events", "ListMetricDescriptors": "list_metric_descriptors",
	"ListPodSandboxMetrics": "list_podsandbox_metrics", "UpdatePodSandboxResources": "update_podsandbox_resources",
	"ListImages": "list_images", "ImageStatus": "image_status", "PullImage": "pull_image",
	"RemoveImage": "remove_image", "ImageFsInfo": "image_fs_info",
}

// MetricsDialOptions returns dial options for Config.DialOptions that keep
// the kubelet's runtime operation metrics on reg, under its names, labels
// and buckets: kubelet_runtime_operations_total,
// kubelet_runtime_operations_errors_total and
// kubelet_runtime_operations_duration_seconds by operation_type (the
// kubelet's names: "run_podsandbox", "list_containers", ...), and
// kubelet_run_podsandbox_duration_seconds and
// kubelet_run_podsandbox_errors_total by runtime_handler. The stream of
// GetContainerEvents counts as one operation when it is opened. The error
// wraps runtime.ErrInvalidConfig if the metrics are registered already.
func MetricsDialOptions(reg prometheus.Registerer) ([]grpc.DialOption, error) {
	if reg == nil {
		return nil, fmt.Errorf("cri: MetricsDialOptions needs a Registerer: %w", runtime.ErrInvalidConfig)
	}
	m := &criMetrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: promutil.Subsystem, Name: "runtime_operations_total",
			Help: "Cumulative number of runtime operations by operation type.",
		}, []string{"operation_type"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: promutil.Subsystem, Name: "runtime_operations_errors_total",
			Help: "Cumulative number of runtime operation errors by operation type.",
		}, []string{"operation_type"}),
		dur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: promutil.Subsystem, Name: "runtime_operations_duration_seconds",
			Help:    "Duration in seconds of runtime operations. Broken down by operation type.",
			Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14),
		}, []string{"operation_type"}),
		sandboxDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: promutil.Subsystem, Name: "run_podsandbox_duration_seconds",
			Help:    "Duration in seconds of the run_podsandbox operations. Broken down by RuntimeClass.Handler.",
			Buckets: prometheus.DefBuckets,
		}, []string{"runtime_handler"}),
		sandboxErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: promutil.Subsystem, Name: "run_podsandbox_errors_total",
			Help: "Cumulative number of the run_podsandbox operation errors by RuntimeClass.Handler.",
		}, []string{"runtime_handler"}),
	}
	if err := promutil.Register(reg, m.ops, m.errs, m.dur, m.sandboxDur, m.sandboxErrs); err != nil {
		return nil, fmt.Errorf("cri: registering metrics: %w: %w", err, runtime.ErrInvalidConfig)
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(m.unary),
		grpc.WithChainStreamInterceptor(m.stream),
	}, nil
}

type criMetrics struct {
	ops, errs, sandboxErrs *prometheus.CounterVec
	dur, sandboxDur        *prometheus.HistogramVec

	// byMethod caches each full method's resolved series.
	byMethod sync.Map // string -> *opSeries
}

type opSeries struct {
	ops, errs prometheus.Counter
	dur       prometheus.Observer
}

func (m *criMetrics) series(fullMethod string) *opSeries {
	if s, ok := m.byMethod.Load(fullMethod); ok {
		return s.(*opSeries)
	}
	op := operationType(fullMethod)
	s, _ := m.byMethod.LoadOrStore(fullMethod, &opSeries{
		ops: m.ops.WithLabelValues(op), errs: m.errs.WithLabelValues(op), dur: m.dur.WithLabelValues(op),
	})
	return s.(*opSeries)
}

func (m *criMetrics) record(method string, start time.Time, err error) {
	s := m.series(method)
	s.ops.Inc()
	s.dur.Observe(time.Since(start).Seconds())
	if err != nil {
		s.errs.Inc()
	}
}

func (m *criMetrics) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	m.record(method, start, err)
	if r, ok := req.(*runtimeapi.RunPodSandboxRequest); ok {
		m.sandboxDur.WithLabelValues(r.GetRuntimeHandler()).Observe(time.Since(start).Seconds())
		if err != nil {
			m.sandboxErrs.WithLabelValues(r.GetRuntimeHandler()).Inc()
		}
	}
	return err
}

func (m *criMetrics) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	start := time.Now()
	s, err := streamer(ctx, desc, cc, method, opts...)
	m.record(method, start, err)
	return s, err
}

// operationType returns the kubelet's label for a full gRPC method
// ("/runtime.v1.RuntimeService/RunPodSandbox"), or the method in snake case
// for one the kubelet does not know.
func operationType(fullMethod string) string {
	name := fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
	if op, ok := operationTypes[name]; ok {
		return op
	}
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
