package agent

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podutil"

	"github.com/nodekit/nodekit/runtime/fake"
)

// gathered returns the value of the series of name whose labels include
// labels (a counter's value, a gauge's, or a histogram's sample count), and
// whether there is one.
func gathered(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func TestAgentMetricsAfterAPodStarts(t *testing.T) {
	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rt.SetImageBehavior("img-init", fake.Behavior{Exit: true})
	reg := prometheus.NewPedanticRegistry()
	c := fastConfig(rt)
	c.Registerer = reg
	r := start(t, c)
	pod := newPod("metrics", v1.RestartPolicyAlways, "a", "b")
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: "img-init"}}
	r.set(pod)
	waitFor(t, "pod running", func() bool { return r.phase(pod.UID) == v1.PodRunning })
	waitFor(t, "both containers in the running gauge", func() bool {
		v, _ := gathered(t, reg, "kubelet_running_containers", map[string]string{"container_state": "running"})
		return v == 2
	})

	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"kubelet_node_name", map[string]string{"node": "n1"}, 1},
		{"kubelet_started_pods_total", nil, 1},
		{"kubelet_started_pods_errors_total", nil, 0},
		{"kubelet_started_containers_total", map[string]string{"container_type": "container"}, 2},
		{"kubelet_started_containers_total", map[string]string{"container_type": "init_container"}, 1},
		{"kubelet_pod_start_duration_seconds", nil, 1},
		{"kubelet_pod_start_sli_duration_seconds", map[string]string{"first_with_network": "true"}, 1},
		{"kubelet_running_pods", nil, 1},
		{"kubelet_pod_worker_duration_seconds", map[string]string{"operation_type": "create"}, 1},
	} {
		got, ok := gathered(t, reg, tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if n := testutil.CollectAndCount(reg, "kubelet_pleg_relist_duration_seconds"); n != 1 {
		t.Errorf("the PLEG's metrics are registered through the agent: %d series", n)
	}
	// pod_start_duration_seconds runs from config.seen, which the pod
	// config stamps when the pod arrives
	h, _ := gatheredHistogram(t, reg, "kubelet_pod_start_duration_seconds")
	if h.GetSampleSum() <= 0 {
		t.Errorf("pod start duration %vs, want the time from config.seen to running", h.GetSampleSum())
	}
}

func TestFailedContainerStartsAreCountedAsErrors(t *testing.T) {
	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.SetFailureRate("StartContainer", 1); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	c := fastConfig(rt)
	c.Registerer = reg
	r := start(t, c)
	r.set(newPod("failing", v1.RestartPolicyAlways, "a"))
	waitFor(t, "a failed start counted", func() bool {
		v, _ := gathered(t, reg, "kubelet_started_containers_errors_total", map[string]string{"container_type": "container", "code": "Unknown"})
		return v >= 1
	})
	// The agent keeps retrying meanwhile, each start counted before its
	// error: read the errors first, so the starts read after cover them.
	errs, _ := gathered(t, reg, "kubelet_started_containers_errors_total", map[string]string{"container_type": "container"})
	started, _ := gathered(t, reg, "kubelet_started_containers_total", map[string]string{"container_type": "container"})
	if started < errs {
		t.Errorf("every failed start is a start too: %v starts, %v errors", started, errs)
	}
	if v, _ := gathered(t, reg, "kubelet_pod_start_duration_seconds", nil); v != 0 {
		t.Errorf("a pod that never runs has no start duration, have %v observations", v)
	}
}

func TestAgentWithoutRegistererKeepsNoMetrics(t *testing.T) {
	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(fastConfig(rt))
	if err != nil {
		t.Fatal(err)
	}
	if a.metrics != nil {
		t.Error("metrics kept without a Registerer")
	}
	reg := prometheus.NewRegistry()
	c := fastConfig(rt)
	c.Registerer = reg
	if _, err := New(c); err != nil {
		t.Fatal(err)
	}
	if _, err := New(c); err == nil {
		t.Error("a second agent on the same registry must be refused, not panic")
	}
}

func gatheredHistogram(t *testing.T, g prometheus.Gatherer, name string) (*dto.Histogram, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram(), true
		}
	}
	return &dto.Histogram{}, false
}

func TestPodStartDurationsAreObservedOnceWhenThePodStarts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := newPod("web", v1.RestartPolicyAlways, "a")
	pod.CreationTimestamp = metav1.NewTime(t0)
	pod.Annotations = map[string]string{podutil.ConfigFirstSeenAnnotationKey: t0.Add(2 * time.Second).Format(time.RFC3339Nano)}
	pending := &v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{Name: "a", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}}}}
	run := &v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
	reg := prometheus.NewPedanticRegistry()
	m, err := newAgentMetrics(reg, "n1")
	if err != nil {
		t.Fatal(err)
	}
	m.statusChanged(pod, nil, pending, t0.Add(3*time.Second))
	m.statusChanged(pod, pending, run, t0.Add(7*time.Second))
	m.statusChanged(pod, run, run, t0.Add(9*time.Second)) // still running: nothing new
	h, _ := gatheredHistogram(t, reg, "kubelet_pod_start_duration_seconds")
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 5 {
		t.Errorf("pod start: %d observations summing to %vs, want one of 5s (config.seen to running)", h.GetSampleCount(), h.GetSampleSum())
	}
	h, _ = gatheredHistogram(t, reg, "kubelet_pod_start_sli_duration_seconds")
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 7 {
		t.Errorf("pod start SLI: %d observations summing to %vs, want one of 7s (creation to all running)", h.GetSampleCount(), h.GetSampleSum())
	}
	other := newPod("other", v1.RestartPolicyAlways, "a")
	other.CreationTimestamp = metav1.NewTime(t0)
	m.statusChanged(other, nil, run, t0.Add(time.Second))
	if v, _ := gathered(t, reg, "kubelet_pod_start_sli_duration_seconds", map[string]string{"first_with_network": "false"}); v != 1 {
		t.Errorf("only the first network pod is first_with_network: %v observations of the second as false", v)
	}
}
