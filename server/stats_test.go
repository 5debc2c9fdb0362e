package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/stats"
)

// statsFixture serves the stats of a fake runtime running pod default/web
// (containers app and side) with scripted usage, rates taken over 10s.
func statsFixture(t *testing.T, mod func(*server.Config)) *fixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := fake.New(fake.Config{Clock: clk})
	require.NoError(t, err)
	rt.SetContainerBehavior("app", fake.Behavior{Usage: fake.Usage{CPUMilli: 500, MemoryBytes: 100 << 20, DiskBytes: 1 << 20}})
	rt.SetContainerBehavior("side", fake.Behavior{Usage: fake.Usage{CPUMilli: 100, MemoryBytes: 10 << 20}})
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", "uid-web"
	pod.Spec.Containers = []v1.Container{{Name: "app", Image: "app:1"}, {Name: "side", Image: "side:1"}}
	rt.AddRunningPod(pod)
	sp, err := stats.New(stats.Config{NodeName: "n1", Runtime: rt, Clock: clk})
	require.NoError(t, err)
	require.NoError(t, sp.Update(context.Background()))
	clk.Step(10 * time.Second)
	require.NoError(t, sp.Update(context.Background()))
	return newFixture(t, func(c *server.Config) {
		c.Stats, c.ResourceMetrics = sp, sp
		if mod != nil {
			mod(c)
		}
	})
}

func TestStatsSummary(t *testing.T) {
	for _, tc := range []struct {
		name, method, path string
		cpuMemOnly         bool
	}{
		{"GET the full summary", http.MethodGet, "/stats/summary", false},
		{"POST as the kubelet also serves", http.MethodPost, "/stats/summary", false},
		{"only_cpu_and_memory leaves out filesystems", http.MethodGet, "/stats/summary?only_cpu_and_memory=true", true},
		{"only_cpu_and_memory other than true is the full summary", http.MethodGet, "/stats/summary?only_cpu_and_memory=yes", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := statsFixture(t, nil)
			req, err := http.NewRequest(tc.method, f.srv.URL+tc.path, nil)
			require.NoError(t, err)
			resp, err := f.srv.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(string(body), "{\n \"node\": {\n  \"nodeName\": \"n1\","), "indented as the kubelet's: %.60q", body)
			dec := json.NewDecoder(strings.NewReader(string(body)))
			dec.DisallowUnknownFields() // every field is the Summary API's
			var s statsapi.Summary
			require.NoError(t, dec.Decode(&s))
			assert.Equal(t, "n1", s.Node.NodeName)
			require.Len(t, s.Pods, 1)
			p := s.Pods[0]
			assert.Equal(t, statsapi.PodReference{Name: "web", Namespace: "default", UID: "uid-web"}, p.PodRef)
			assert.Equal(t, uint64(6e8), *p.CPU.UsageNanoCores, "600m between the two updates")
			assert.Equal(t, uint64(110<<20), *p.Memory.WorkingSetBytes)
			assert.Equal(t, uint64(6e8), *s.Node.CPU.UsageNanoCores)
			if tc.cpuMemOnly {
				assert.Nil(t, s.Node.Fs)
				assert.Nil(t, p.EphemeralStorage)
			} else {
				assert.NotNil(t, s.Node.Fs)
				assert.NotNil(t, s.Node.Runtime.ImageFs)
				assert.Equal(t, uint64(1<<20), *p.EphemeralStorage.UsedBytes)
			}
		})
	}
}

// summaryFunc is a StatsProvider from a func.
type summaryFunc func(context.Context) (*statsapi.Summary, error)

func (f summaryFunc) GetStatsSummary(ctx context.Context) (*statsapi.Summary, error) { return f(ctx) }

func TestStatsSummaryErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code int
		body string
	}{
		{"a failure is the kubelet's internal error", errors.New("boom"), http.StatusInternalServerError, "Internal Error: boom\n"},
		{"a provider without stats is not found", fmt.Errorf("no stats: %w", runtime.ErrNotSupported), http.StatusNotFound, "no stats: operation not supported by the runtime\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *server.Config) {
				c.Stats = summaryFunc(func(context.Context) (*statsapi.Summary, error) { return nil, tc.err })
			})
			code, body := f.get(t, "/stats/summary")
			assert.Equal(t, tc.code, code)
			if tc.code == http.StatusNotFound {
				assert.Contains(t, body, "no stats")
				return
			}
			assert.Equal(t, tc.body, body)
		})
	}
}

// metricsFunc is a ResourceMetricsProvider from a func.
type metricsFunc func(context.Context) ([]*dto.MetricFamily, error)

func (f metricsFunc) GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	return f(ctx)
}

func TestStatsPathsServed(t *testing.T) {
	notSupported := func(c *server.Config) {
		c.ResourceMetrics = metricsFunc(func(context.Context) ([]*dto.MetricFamily, error) { return nil, runtime.ErrNotSupported })
	}
	failing := func(c *server.Config) {
		c.ResourceMetrics = metricsFunc(func(context.Context) ([]*dto.MetricFamily, error) { return nil, errors.New("boom") })
	}
	for _, tc := range []struct {
		name string
		mod  func(*server.Config)
		path string
		code int
	}{
		{"the kubelet serves no /stats/ but the summary", nil, "/stats/", http.StatusNotFound},
		{"nor /stats/container", nil, "/stats/container", http.StatusNotFound},
		{"no summary without a provider", func(c *server.Config) { c.Stats = nil }, "/stats/summary", http.StatusNotFound},
		{"no resource metrics without a provider", func(c *server.Config) { c.ResourceMetrics = nil }, "/metrics/resource", http.StatusNotFound},
		{"the read-only port serves the summary", func(c *server.Config) { c.ReadOnly = true }, "/stats/summary", http.StatusOK},
		{"and the resource metrics", func(c *server.Config) { c.ReadOnly = true }, "/metrics/resource", http.StatusOK},
		{"a provider without resource metrics is not found", notSupported, "/metrics/resource", http.StatusNotFound},
		{"failing resource metrics are an error", failing, "/metrics/resource", http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := statsFixture(t, tc.mod)
			code, _ := f.get(t, tc.path)
			assert.Equal(t, tc.code, code)
		})
	}
}

func TestResourceMetrics(t *testing.T) {
	f := statsFixture(t, nil)
	resp, err := f.srv.Client().Get(f.srv.URL + "/metrics/resource")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err)
	value := func(name string, labels ...string) float64 {
		t.Helper()
		mf, ok := mfs[name]
		require.True(t, ok, "%s missing", name)
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
		t.Fatalf("%s%v missing", name, labels)
		return 0
	}
	assert.Equal(t, 5.0, value("container_cpu_usage_seconds_total", "container", "app", "pod", "web", "namespace", "default"), "500m for 10s")
	assert.Equal(t, float64(100<<20), value("container_memory_working_set_bytes", "container", "app", "pod", "web", "namespace", "default"))
	assert.Equal(t, 6.0, value("pod_cpu_usage_seconds_total", "pod", "web", "namespace", "default"))
	assert.Equal(t, float64(110<<20), value("pod_memory_working_set_bytes", "pod", "web", "namespace", "default"))
	assert.Equal(t, 6.0, value("node_cpu_usage_seconds_total"))
	assert.Equal(t, float64(110<<20), value("node_memory_working_set_bytes"))
	assert.Equal(t, float64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()), value("container_start_time_seconds", "container", "side"))
	assert.Equal(t, 0.0, value("resource_scrape_error"))
	assert.Equal(t, "[STABLE] Cumulative cpu time consumed by the node in core-seconds", mfs["node_cpu_usage_seconds_total"].GetHelp())
	assert.NotZero(t, mfs["node_cpu_usage_seconds_total"].GetMetric()[0].GetTimestampMs(), "samples carry their time")
}

func TestStatsAuthorization(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, granted string
		code                        int
	}{
		{"/stats/summary by nodes/stats", http.MethodGet, "/stats/summary", "stats", http.StatusOK},
		{"POST /stats/summary by nodes/stats", http.MethodPost, "/stats/summary", "stats", http.StatusOK},
		{"/stats/summary not by nodes/proxy", http.MethodGet, "/stats/summary", "proxy", http.StatusForbidden},
		{"/metrics/resource by nodes/metrics", http.MethodGet, "/metrics/resource", "metrics", http.StatusOK},
		{"/metrics/resource not by nodes/stats", http.MethodGet, "/metrics/resource", "stats", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := statsFixture(t, func(c *server.Config) {
				c.Auth = &server.Auth{Authenticator: tokenAuth{"t": "someone"}, Authorizer: grants{tc.granted: true}, NodeName: "n1"}
			})
			req, err := http.NewRequest(tc.method, f.srv.URL+tc.path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer t")
			resp, err := f.srv.Client().Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, tc.code, resp.StatusCode)
		})
	}
}
