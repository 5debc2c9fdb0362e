package podworkers_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podworkers"
)

func TestPodWorkerDurationIsObservedPerOperation(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	h := newHarness(t, func(c *podworkers.Config) { c.Registerer = reg })
	pod := newNamedPod("m1", "ns", "web", false)
	// the sync loop saw the pod 2s before it reached the workers
	h.update(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod, StartTime: h.clock.Now().Add(-2 * time.Second)})
	h.p.WaitIdle()
	h.upd(pod)
	h.p.WaitIdle()
	h.kill(pod)
	h.p.WaitIdle()

	want := `
# HELP kubelet_pod_worker_duration_seconds Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync
# TYPE kubelet_pod_worker_duration_seconds histogram
` + histLines("create", 2, 1) + histLines("kill", 0, 1) + histLines("sync", 0, 0) + histLines("terminated", 0, 1) + histLines("update", 0, 1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_pod_worker_duration_seconds"); err != nil {
		t.Error(err)
	}
}

// histLines renders one series of pod_worker_duration_seconds with count
// observations summing to sum, all in the smallest bucket that holds sum.
func histLines(op string, sum float64, count int) string {
	var b strings.Builder
	for _, le := range prometheus.DefBuckets {
		n := 0
		if sum <= le {
			n = count
		}
		b.WriteString(`kubelet_pod_worker_duration_seconds_bucket{operation_type="` + op + `",le="` + fmtFloat(le) + `"} ` + itoa(n) + "\n")
	}
	b.WriteString(`kubelet_pod_worker_duration_seconds_bucket{operation_type="` + op + `",le="+Inf"} ` + itoa(count) + "\n")
	b.WriteString(`kubelet_pod_worker_duration_seconds_sum{operation_type="` + op + `"} ` + fmtFloat(sum) + "\n")
	b.WriteString(`kubelet_pod_worker_duration_seconds_count{operation_type="` + op + `"} ` + itoa(count) + "\n")
	return b.String()
}

func TestRestartedPodsAreCountedByStatic(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	h := newHarness(t, func(c *podworkers.Config) { c.Registerer = reg })
	pod := newNamedPod("fixed", "kube-system", "etcd", true)
	h.create(pod)
	h.p.WaitIdle()
	h.kill(pod)
	h.create(pod) // the manifest came back with the same UID
	h.p.WaitIdle()
	h.p.SyncKnownPods([]*v1.Pod{pod}) // forgets the old instance: a restart
	want := `
# HELP kubelet_restarted_pods_total Number of pods that have been restarted because they were deleted and recreated with the same UID while the kubelet was watching them (common for static pods, extremely uncommon for API pods)
# TYPE kubelet_restarted_pods_total counter
kubelet_restarted_pods_total{static="false"} 0
kubelet_restarted_pods_total{static="true"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_restarted_pods_total"); err != nil {
		t.Error(err)
	}
}

func TestPodWorkersWithoutRegistererKeepNoMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	newHarness(t, func(c *podworkers.Config) { c.Registerer = reg })
	if _, err := podworkers.New(podworkers.Config{Syncer: &nopSyncer{}, Cache: readyCache{}, Registerer: reg}); err == nil {
		t.Fatal("registering the metrics twice on one registry must fail New")
	}
	// Twice: were the metrics registered on a global registry without a
	// Registerer, the second would clash.
	for range 2 {
		if _, err := podworkers.New(podworkers.Config{Syncer: &nopSyncer{}, Cache: readyCache{}}); err != nil {
			t.Fatalf("without a Registerer nothing is registered, so nothing can clash: %v", err)
		}
	}
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func itoa(n int) string { return strconv.Itoa(n) }
