package pleg

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/promutil"
	"github.com/nodekit/nodekit/runtime"
)

// relistMetrics are the kubelet's PLEG metrics (names, help, buckets as in
// pkg/kubelet/metrics), plus running_pods and running_containers, which the
// kubelet also updates from each relist.
type relistMetrics struct {
	duration, interval prometheus.Histogram
	lastSeen           prometheus.Gauge
	discard            prometheus.Counter
	runningPods        prometheus.Gauge
	// containers by state, resolved once so a relist does no label lookup
	created, running, exited, unknown prometheus.Gauge

	// lastStart is the start of the previous successful relist; relistMu
	// guards it.
	lastStart time.Time
}

func newRelistMetrics(reg prometheus.Registerer) (*relistMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	containers := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: promutil.Subsystem, Name: "running_containers",
		Help: "Number of containers currently running",
	}, []string{"container_state"})
	m := &relistMetrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: promutil.Subsystem, Name: "pleg_relist_duration_seconds",
			Help: "Duration in seconds for relisting pods in PLEG.", Buckets: prometheus.DefBuckets,
		}),
		interval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: promutil.Subsystem, Name: "pleg_relist_interval_seconds",
			Help: "Interval in seconds between relisting in PLEG.", Buckets: prometheus.DefBuckets,
		}),
		lastSeen: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: promutil.Subsystem, Name: "pleg_last_seen_seconds",
			Help: "Timestamp in seconds when PLEG was last seen active.",
		}),
		discard: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: promutil.Subsystem, Name: "pleg_discard_events",
			Help: "The number of discard events in PLEG.",
		}),
		runningPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: promutil.Subsystem, Name: "running_pods",
			Help: "Number of pods that have a running pod sandbox",
		}),
		created: containers.WithLabelValues(string(runtime.ContainerStateCreated)),
		running: containers.WithLabelValues(string(runtime.ContainerStateRunning)),
		exited:  containers.WithLabelValues(string(runtime.ContainerStateExited)),
		unknown: containers.WithLabelValues(string(runtime.ContainerStateUnknown)),
	}
	if err := promutil.Register(reg, m.duration, m.interval, m.lastSeen, m.discard, m.runningPods, containers); err != nil {
		return nil, fmt.Errorf("pleg: registering metrics: %w: %w", err, runtime.ErrInvalidConfig)
	}
	return m, nil
}

// observe records one relist; relistMu is held; listed is whether GetPods succeeded. As the kubelet, the
// interval is between the starts of successful relists, the duration is
// that of every relist, and the running figures come from listings that
// succeeded.
func (m *relistMetrics) observe(st *RelistStats, listed bool) {
	m.duration.Observe(st.Duration.Seconds())
	if st.Dropped > 0 {
		m.discard.Add(float64(st.Dropped))
	}
	if !listed {
		return
	}
	if !m.lastStart.IsZero() {
		m.interval.Observe(st.Timestamp.Sub(m.lastStart).Seconds())
	}
	m.lastStart = st.Timestamp
	m.lastSeen.Set(float64(st.Timestamp.Unix()))
	m.runningPods.Set(float64(st.RunningPods))
	m.created.Set(float64(st.Containers.Created))
	m.running.Set(float64(st.Containers.Running))
	m.exited.Set(float64(st.Containers.Exited))
	m.unknown.Set(float64(st.Containers.Unknown))
}

// streamMetrics are the kubelet's evented PLEG connection metrics.
type streamMetrics struct {
	conns, connErrs prometheus.Counter
	latency         prometheus.Histogram
}

func newStreamMetrics(reg prometheus.Registerer) (*streamMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &streamMetrics{
		connErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: promutil.Subsystem, Name: "evented_pleg_connection_error_count",
			Help: "The number of errors encountered during the establishment of streaming connection with the CRI runtime.",
		}),
		conns: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: promutil.Subsystem, Name: "evented_pleg_connection_success_count",
			Help: "The number of times a streaming client was obtained to receive CRI Events.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: promutil.Subsystem, Name: "evented_pleg_connection_latency_seconds",
			Help:    "The latency of streaming connection with the CRI runtime, measured in seconds.",
			Buckets: prometheus.DefBuckets,
		}),
	}
	if err := promutil.Register(reg, m.connErrs, m.conns, m.latency); err != nil {
		return nil, fmt.Errorf("pleg: registering evented metrics: %w: %w", err, runtime.ErrInvalidConfig)
	}
	return m, nil
}

// addStatus adds sign (1 or -1) times what st counts towards the running
// gauges: between relists the evented PLEG moves them by the difference
// between a pod's cached status and the one an event brings, as the
// kubelet's evented PLEG updates them from each event.
func (m *relistMetrics) addStatus(st *runtime.PodStatus, sign float64) {
	if st == nil {
		return
	}
	for _, s := range st.SandboxStatuses {
		if s.State == runtime.SandboxStateReady {
			m.runningPods.Add(sign)
			break
		}
	}
	for _, c := range st.ContainerStatuses {
		switch c.State {
		case runtime.ContainerStateRunning:
			m.running.Add(sign)
		case runtime.ContainerStateExited:
			m.exited.Add(sign)
		case runtime.ContainerStateCreated:
			m.created.Add(sign)
		default:
			m.unknown.Add(sign)
		}
	}
}
