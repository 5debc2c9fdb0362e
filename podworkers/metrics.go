package podworkers

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/promutil"
	"github.com/nodekit/nodekit/podutil"
)

// workerMetrics are the kubelet's pod worker metrics.
type workerMetrics struct {
	// duration by operation_type, resolved once: the UpdateType values and
	// "terminated"
	sync, update, create, kill, terminated prometheus.Observer
	// restarted by static (false, true)
	restarted [2]prometheus.Counter
}

func newWorkerMetrics(reg prometheus.Registerer) (*workerMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: promutil.Subsystem, Name: "pod_worker_duration_seconds",
		Help:    "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
		Buckets: prometheus.DefBuckets,
	}, []string{"operation_type"})
	restarted := prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: promutil.Subsystem, Name: "restarted_pods_total",
		Help: "Number of pods that have been restarted because they were deleted and recreated with the same UID while the kubelet was watching them (common for static pods, extremely uncommon for API pods)",
	}, []string{"static"})
	if err := promutil.Register(reg, duration, restarted); err != nil {
		return nil, fmt.Errorf("registering metrics: %w: %w", err, ErrInvalidConfig)
	}
	return &workerMetrics{
		sync:       duration.WithLabelValues(SyncPodSync.String()),
		update:     duration.WithLabelValues(SyncPodUpdate.String()),
		create:     duration.WithLabelValues(SyncPodCreate.String()),
		kill:       duration.WithLabelValues(SyncPodKill.String()),
		terminated: duration.WithLabelValues("terminated"),
		restarted:  [2]prometheus.Counter{restarted.WithLabelValues(strconv.FormatBool(false)), restarted.WithLabelValues(strconv.FormatBool(true))},
	}, nil
}

// observe records how long the update w took from its StartTime to the end
// of its sync, as the kubelet's pod_worker_duration_seconds: by update type,
// or "terminated" for the final cleanup.
func (m *workerMetrics) observe(w *work, now time.Time) {
	start := w.options.StartTime
	if start.IsZero() {
		return
	}
	var o prometheus.Observer
	switch {
	case w.state == StateTerminated:
		o = m.terminated
	case w.options.UpdateType == SyncPodUpdate:
		o = m.update
	case w.options.UpdateType == SyncPodCreate:
		o = m.create
	case w.options.UpdateType == SyncPodKill:
		o = m.kill
	default:
		o = m.sync
	}
	o.Observe(now.Sub(start).Seconds())
}

func (m *workerMetrics) restart(static bool) {
	if static {
		m.restarted[1].Inc()
	} else {
		m.restarted[0].Inc()
	}
}

// static reports whether the pod's spec came from a static source; a pod
// known only from the runtime is not.
func (s *podSyncStatus) static() bool {
	for _, o := range []*UpdatePodOptions{s.activeUpdate, s.pendingUpdate} {
		if o != nil && o.Pod != nil {
			return podutil.IsStaticPod(o.Pod)
		}
	}
	return false
}
