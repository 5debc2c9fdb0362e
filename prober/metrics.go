package prober

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/promutil"
)

// Result label values of prober_probe_total, as the kubelet's.
const (
	metricSuccessful = "successful"
	metricFailed     = "failed"
	metricUnknown    = "unknown"
)

// metrics are the kubelet's prober metrics (names, labels, help and
// buckets as in pkg/kubelet/prober), which the kubelet serves on
// /metrics/probes.
type metrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "prober", Name: "probe_total",
			Help: "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "prober", Name: "probe_duration_seconds",
			Help: "Duration in seconds for a probe response.", Buckets: prometheus.DefBuckets,
		}, []string{"probe_type", "container", "pod", "namespace"}),
	}
	if err := promutil.Register(reg, m.total, m.duration); err != nil {
		return nil, fmt.Errorf("prober: registering metrics: %w: %w", err, ErrInvalidConfig)
	}
	return m, nil
}

// workerMetrics are a worker's series, resolved once so that a probe does
// no label lookup.
type workerMetrics struct {
	m                           *metrics
	successful, failed, unknown prometheus.Counter
	duration                    prometheus.Observer
}

func (m *metrics) forWorker(w *worker) *workerMetrics {
	if m == nil {
		return nil
	}
	t, c, p := w.typ.String(), w.container.Name, w.pod
	uid := string(p.UID)
	return &workerMetrics{
		m:          m,
		successful: m.total.WithLabelValues(t, metricSuccessful, c, p.Name, p.Namespace, uid),
		failed:     m.total.WithLabelValues(t, metricFailed, c, p.Name, p.Namespace, uid),
		unknown:    m.total.WithLabelValues(t, metricUnknown, c, p.Name, p.Namespace, uid),
		duration:   m.duration.WithLabelValues(t, c, p.Name, p.Namespace),
	}
}

// observe counts one probe run; as the kubelet, the duration is recorded
// for successes and unknown results only.
func (wm *workerMetrics) observe(res Result, err error, seconds float64) {
	if wm == nil {
		return
	}
	switch {
	case err != nil:
		wm.unknown.Inc()
		wm.duration.Observe(seconds)
	case res == Success:
		wm.successful.Inc()
		wm.duration.Observe(seconds)
	default:
		wm.failed.Inc()
	}
}

// delete drops the worker's series once it stops.
func (wm *workerMetrics) delete(w *worker) {
	if wm == nil {
		return
	}
	t, c, p := w.typ.String(), w.container.Name, w.pod
	uid := string(p.UID)
	for _, r := range []string{metricSuccessful, metricFailed, metricUnknown} {
		wm.m.total.DeleteLabelValues(t, r, c, p.Name, p.Namespace, uid)
	}
	wm.m.duration.DeleteLabelValues(t, c, p.Name, p.Namespace)
}
