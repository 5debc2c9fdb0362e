package agent

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/promutil"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// Container type labels, the kubelet's.
const (
	labelContainer          = "container"
	labelInitContainer      = "init_container"
	labelEphemeralContainer = "ephemeral_container"
)

// agentMetrics are the kubelet's pod start metrics, kept from each SyncPod
// result and status, so that they hold for any runtime.
type agentMetrics struct {
	startedPods, startedPodsErrors prometheus.Counter
	startedContainers              *prometheus.CounterVec
	startedContainersErrors        *prometheus.CounterVec
	podStart                       prometheus.Histogram
	podStartSLI                    *prometheus.HistogramVec

	// node holds the node startup gauges, nil without Config.Node.
	node *nodeStartupMetrics

	// firstNetworkPod is set once a pod on the pod network has started:
	// the SLI's first_with_network is "true" for that one only.
	firstNetworkPod atomic.Bool
}

func newAgentMetrics(reg prometheus.Registerer, nodeName string) (*agentMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	node := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: promutil.Subsystem, Name: "node_name", Help: "The node's name. The count is always 1.",
	}, []string{"node"})
	node.WithLabelValues(nodeName).Set(1)
	m := &agentMetrics{
		startedPods: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: promutil.Subsystem, Name: "started_pods_total", Help: "Cumulative number of pods started",
		}),
		startedPodsErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: promutil.Subsystem, Name: "started_pods_errors_total", Help: "Cumulative number of errors when starting pods",
		}),
		startedContainers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: promutil.Subsystem, Name: "started_containers_total", Help: "Cumulative number of containers started",
		}, []string{"container_type"}),
		startedContainersErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: promutil.Subsystem, Name: "started_containers_errors_total", Help: "Cumulative number of errors when starting containers",
		}, []string{"container_type", "code"}),
		podStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: promutil.Subsystem, Name: "pod_start_duration_seconds",
			Help:    "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
			Buckets: promutil.PodStartupBuckets(),
		}),
		podStartSLI: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: promutil.Subsystem, Name: "pod_start_sli_duration_seconds",
			Help:    "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
			Buckets: promutil.PodStartupBuckets(),
		}, []string{"first_with_network"}),
	}
	if err := promutil.Register(reg, node, m.startedPods, m.startedPodsErrors, m.startedContainers, m.startedContainersErrors, m.podStart, m.podStartSLI); err != nil {
		return nil, fmt.Errorf("registering metrics: %w: %w", err, ErrInvalidConfig)
	}
	return m, nil
}

// syncResult counts the sandboxes and containers SyncPod tried to start, as
// the kubelet counts its attempts: a container counts once its creation
// was tried (not when it waits in back-off or for its image), an error
// once creating or starting it failed.
func (m *agentMetrics) syncResult(pod *v1.Pod, res *runtime.PodSyncResult) {
	for _, r := range res.SyncResults {
		switch r.Action {
		case runtime.CreatePodSandbox:
			m.startedPods.Inc()
			if r.Error != nil {
				m.startedPodsErrors.Inc()
			}
		case runtime.StartContainer, runtime.InitContainer:
			created := errors.Is(r.Error, runtime.ErrCreateContainer) || errors.Is(r.Error, runtime.ErrRunContainer)
			if r.Error != nil && !created && !errors.Is(r.Error, runtime.ErrPostStartHook) {
				continue // never created: back-off, image, config
			}
			label := labelContainer
			if r.Action == runtime.InitContainer {
				label = labelInitContainer
			} else if isEphemeral(pod, r.Target) {
				label = labelEphemeralContainer
			}
			m.startedContainers.WithLabelValues(label).Inc()
			if created {
				m.startedContainersErrors.WithLabelValues(label, status.Code(r.Error).String()).Inc()
			}
		}
	}
}

func isEphemeral(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return true
		}
	}
	return false
}

// statusChanged observes the start durations when the pod's new status
// shows it started and the old one (nil if none) did not:
// pod_start_duration_seconds from the first time the agent saw the pod
// (the config.seen annotation) to phase Running, and
// pod_start_sli_duration_seconds from the pod's creation to every
// container running. Unlike the kubelet's SLI, image pull time is not
// subtracted: the runtime contract does not report it.
func (m *agentMetrics) statusChanged(pod *v1.Pod, old, cur *v1.PodStatus, now time.Time) {
	if cur.Phase == v1.PodRunning && (old == nil || old.Phase == v1.PodPending) {
		if seen, err := time.Parse(time.RFC3339Nano, pod.Annotations[podutil.ConfigFirstSeenAnnotationKey]); err == nil {
			m.podStart.Observe(now.Sub(seen).Seconds())
		}
	}
	if allStarted(pod, cur) && (old == nil || !allStarted(pod, old)) && !pod.CreationTimestamp.IsZero() {
		first := false
		if !pod.Spec.HostNetwork {
			first = m.firstNetworkPod.CompareAndSwap(false, true)
		}
		m.podStartSLI.WithLabelValues(strconv.FormatBool(first)).Observe(now.Sub(pod.CreationTimestamp.Time).Seconds())
	}
}

// allStarted reports whether every regular container of pod runs in st.
func allStarted(pod *v1.Pod, st *v1.PodStatus) bool {
	if len(pod.Spec.Containers) == 0 || len(st.ContainerStatuses) < len(pod.Spec.Containers) {
		return false
	}
	for i := range st.ContainerStatuses {
		if st.ContainerStatuses[i].State.Running == nil {
			return false
		}
	}
	return true
}
