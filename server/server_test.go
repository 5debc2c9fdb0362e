package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/crilog"
	"github.com/nodekit/nodekit/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type podList []*v1.Pod

func (l podList) Pods() []*v1.Pod { return l }

type runtimePods []*runtime.Pod

func (r runtimePods) GetPods(context.Context, bool) ([]*runtime.Pod, error) { return r, nil }

// fileLogs serves each container's logs from a CRI log file named after
// its ID, as runtime/cri does from the path the runtime reports; running
// says which containers a follow waits for.
type fileLogs struct {
	dir     string
	mu      sync.Mutex
	running map[string]bool
	calls   chan struct{} // receives once per call, if set
}

func (f *fileLogs) path(id string) string { return filepath.Join(f.dir, id+".log") }

func (f *fileLogs) GetContainerLogs(ctx context.Context, _ *v1.Pod, id runtime.ContainerID, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
	if f.calls != nil {
		f.calls <- struct{}{}
	}
	if _, err := os.Stat(f.path(id.ID)); err != nil {
		return fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	return crilog.ReadLogs(ctx, f.path(id.ID), opts, crilog.Options{PollInterval: time.Millisecond, Running: func(context.Context) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.running[id.ID]
	}}, stdout, stderr)
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func criLines(msgs ...string) string {
	var b strings.Builder
	for i, m := range msgs {
		fmt.Fprintf(&b, "%s stdout F %s\n", t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano), m)
	}
	return b.String()
}

func testPod() *v1.Pod {
	return &v1.Pod{
		TypeMeta:   metav1.TypeMeta{},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "app:1"}, {Name: "waiting", Image: "w:1"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
			{Name: "app", ContainerID: "fake://c2", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
				LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "fake://c1"}}},
			{Name: "waiting", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ErrImagePull"}}},
		}},
	}
}

type fixture struct {
	logs *fileLogs
	srv  *httptest.Server
	reg  *prometheus.Registry
	fail error // returned by the "syncloop" check
	mu   sync.Mutex
}

func newFixture(t *testing.T, mod func(*server.Config)) *fixture {
	t.Helper()
	f := &fixture{logs: &fileLogs{dir: t.TempDir(), running: map[string]bool{}}, reg: prometheus.NewRegistry()}
	require.NoError(t, os.WriteFile(f.logs.path("c1"), []byte(criLines("old one", "old two")), 0o644))
	require.NoError(t, os.WriteFile(f.logs.path("c2"), []byte(criLines("a", "b", "c")), 0o644))
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "kubelet_started_pods_total", Help: "Cumulative number of pods started"})
	c.Add(3)
	f.reg.MustRegister(c)
	cfg := server.Config{
		Pods: podList{testPod()},
		RunningPods: runtimePods{{ID: "uid-web", Name: "web", Namespace: "default",
			Containers: []*runtime.Container{{ID: runtime.ContainerID{Type: "fake", ID: "c2"}, Name: "app", Image: "app:1"}},
			Sandboxes:  []*runtime.Container{{ID: runtime.ContainerID{Type: "fake", ID: "sandbox1"}, State: runtime.ContainerStateRunning}}}},
		Logs:    f.logs,
		Metrics: f.reg,
		HealthChecks: []server.HealthCheck{{Name: "syncloop", Check: func() error {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.fail
		}}},
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := server.New(cfg)
	require.NoError(t, err)
	f.srv = httptest.NewServer(s.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := f.srv.Client().Get(f.srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestHealthz(t *testing.T) {
	f := newFixture(t, nil)
	code, body := f.get(t, "/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
	_, body = f.get(t, "/healthz?verbose")
	assert.Equal(t, "[+]ping ok\n[+]syncloop ok\nhealthz check passed\n", body)

	f.mu.Lock()
	f.fail = errors.New("sync Loop took longer than expected")
	f.mu.Unlock()
	code, body = f.get(t, "/healthz")
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Equal(t, "[+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n", body)
	code, body = f.get(t, "/healthz/syncloop")
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Equal(t, "internal server error: sync Loop took longer than expected\n", body)
	code, _ = f.get(t, "/healthz?exclude=syncloop")
	assert.Equal(t, http.StatusOK, code, "an excluded check does not fail the whole")
	code, body = f.get(t, "/healthz/ping")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
}

func TestPodsAndRunningPods(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		path  string
		check func(t *testing.T, l v1.PodList)
	}{
		{"/pods", func(t *testing.T, l v1.PodList) {
			require.Len(t, l.Items, 1)
			assert.Equal(t, v1.PodRunning, l.Items[0].Status.Phase, "with the status the agent generated")
		}},
		{"/runningpods/", func(t *testing.T, l v1.PodList) {
			require.Len(t, l.Items, 1)
			assert.Equal(t, types.UID("uid-web"), l.Items[0].UID)
			assert.Equal(t, "app:1", l.Items[0].Spec.Containers[0].Image)
		}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			code, body := f.get(t, tc.path)
			require.Equal(t, http.StatusOK, code)
			var l v1.PodList
			require.NoError(t, json.Unmarshal([]byte(body), &l))
			assert.Equal(t, "PodList", l.Kind)
			assert.Equal(t, "v1", l.APIVersion)
			tc.check(t, l)
		})
	}
}

func TestMetrics(t *testing.T) {
	f := newFixture(t, nil)
	code, body := f.get(t, "/metrics")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "# TYPE kubelet_started_pods_total counter\nkubelet_started_pods_total 3\n")
}

func TestProbeMetrics(t *testing.T) {
	probes := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "prober_probe_total", Help: "probes"})
	c.Inc()
	probes.MustRegister(c)
	f := newFixture(t, func(c *server.Config) { c.ProbeMetrics = probes })
	code, body := f.get(t, "/metrics/probes")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "prober_probe_total 1\n")
	_, body = f.get(t, "/metrics")
	assert.NotContains(t, body, "prober_probe_total", "probe metrics are served apart, as the kubelet's")
}

func TestContainerLogs(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name, query string
		code        int
		body        string
	}{
		{"all lines", "", 200, "a\nb\nc\n"},
		{"tailLines", "?tailLines=2", 200, "b\nc\n"},
		{"the legacy tail", "?tail=1", 200, "c\n"},
		{"tail=all is everything", "?tail=all", 200, "a\nb\nc\n"},
		{"limitBytes", "?limitBytes=3", 200, "a\nb"},
		{"timestamps", "?tailLines=1&timestamps=true", 200, t0.Add(2*time.Second).Format(time.RFC3339Nano) + " c\n"},
		{"sinceTime", "?sinceTime=" + t0.Add(time.Second).Format(time.RFC3339), 200, "b\nc\n"},
		{"previous shows the last terminated instance", "?previous=true", 200, "old one\nold two\n"},
		{"previous=False in any case is false, as apimachinery decodes it", "?previous=False", 200, "a\nb\nc\n"},
		{"previous=0 is false", "?previous=0", 200, "a\nb\nc\n"},
		{"follow of a stopped container ends at the end of its file", "?follow", 200, "a\nb\nc\n"},
		{"an unparsable number is a bad request", "?tailLines=ten", 400, `{"message": "Unable to decode query."}` + "\n"},
		{"an unparsable time is a bad request", "?sinceTime=yesterday", 400, `{"message": "Unable to decode query."}` + "\n"},
		{"a negative tail is invalid", "?tailLines=-1", 422, `{"message": "Invalid request."}` + "\n"},
		{"zero limitBytes is invalid", "?limitBytes=0", 422, `{"message": "Invalid request."}` + "\n"},
		{"sinceSeconds with sinceTime is invalid", "?sinceSeconds=5&sinceTime=" + t0.Format(time.RFC3339), 422, `{"message": "Invalid request."}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := f.get(t, "/containerLogs/default/web/app"+tc.query)
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.body, body)
		})
	}
}

func TestContainerLogsRefusals(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name, path string
		code       int
		body       string
	}{
		{"unknown pod", "/containerLogs/default/nope/app", 404, `pod "nope" does not exist` + "\n"},
		{"pod in another namespace", "/containerLogs/kube-system/web/app", 404, `pod "web" does not exist` + "\n"},
		{"unknown container", "/containerLogs/default/web/nope", 404, `container "nope" not found in pod "web"` + "\n"},
		{"container waiting on its image", "/containerLogs/default/web/waiting", 400, `container "waiting" in pod "web" is waiting to start: image can't be pulled` + "\n"},
		{"no previous instance", "/containerLogs/default/web/waiting?previous=1", 400, `previous terminated container "waiting" in pod "web" not found` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := f.get(t, tc.path)
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.body, body)
		})
	}
}

func TestContainerLogsOfAStatusWithoutIDs(t *testing.T) {
	pod := testPod()
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "idless"}, v1.Container{Name: "gone"})
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses,
		v1.ContainerStatus{Name: "idless", State: running}, v1.ContainerStatus{Name: "gone", State: running})
	f := newFixture(t, func(c *server.Config) {
		c.Pods = podList{pod}
		c.RunningPods = runtimePods{{ID: "uid-web", Name: "web", Namespace: "default",
			Containers: []*runtime.Container{{ID: runtime.ContainerID{Type: "fake", ID: "c2"}, Name: "idless"}}}}
	})
	code, body := f.get(t, "/containerLogs/default/web/idless")
	assert.Equal(t, 200, code, "a provider's status without IDs: the runtime's running container")
	assert.Equal(t, "a\nb\nc\n", body)
	code, body = f.get(t, "/containerLogs/default/web/gone")
	assert.Equal(t, 400, code, "and one the runtime does not run is not available")
	assert.Equal(t, `container "gone" in pod "web" is not available`+"\n", body)
}

func TestFollowStreamsAndEndsWhenTheClientGoes(t *testing.T) {
	f := newFixture(t, nil)
	f.logs.mu.Lock()
	f.logs.running["c2"] = true
	f.logs.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/containerLogs/default/web/app?follow=true", nil)
	require.NoError(t, err)
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	buf := make([]byte, 6)
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	assert.Equal(t, "a\nb\nc\n", string(buf), "lines arrive while the container still runs")

	lf, err := os.OpenFile(f.logs.path("c2"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = lf.WriteString(fmt.Sprintf("%s stdout F d\n", t0.Add(time.Minute).Format(time.RFC3339Nano)))
	require.NoError(t, err)
	require.NoError(t, lf.Close())
	buf = buf[:2]
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	assert.Equal(t, "d\n", string(buf), "a line written later is streamed")

	cancel() // the client goes away; goleak checks the handler's goroutine ended
	f.srv.Close()
}

func TestReadOnlyServesNoLogs(t *testing.T) {
	f := newFixture(t, func(c *server.Config) { c.ReadOnly = true })
	code, _ := f.get(t, "/containerLogs/default/web/app")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = f.get(t, "/runningpods/")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = f.get(t, "/pods")
	assert.Equal(t, http.StatusOK, code)
	code, _ = f.get(t, "/metrics")
	assert.Equal(t, http.StatusOK, code)
}

type tokenAuth map[string]string // token -> user

func (a tokenAuth) AuthenticateRequest(r *http.Request) (*server.User, bool, error) {
	name, ok := a[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if !ok {
		return nil, false, nil
	}
	return &server.User{Name: name}, true, nil
}

// onlyMetrics lets "prometheus" read metrics and "admin" everything.
type onlyMetrics struct{ seen chan server.Attributes }

func (o onlyMetrics) Authorize(_ context.Context, a server.Attributes) (bool, string, error) {
	o.seen <- a
	return a.User.Name == "admin" || a.Subresource == "metrics", "", nil
}

func TestAuthRefusesAsTheKubelet(t *testing.T) {
	seen := make(chan server.Attributes, 10)
	f := newFixture(t, func(c *server.Config) {
		c.Auth = &server.Auth{Authenticator: tokenAuth{"t1": "prometheus", "t2": "admin"}, Authorizer: onlyMetrics{seen}, NodeName: "n1"}
	})
	do := func(token, path string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := f.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := do("", "/pods")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Equal(t, "Unauthorized\n", body)
	code, _ = do("t1", "/metrics")
	assert.Equal(t, http.StatusOK, code)
	a := <-seen
	assert.Equal(t, server.Attributes{User: &server.User{Name: "prometheus", Groups: []string{server.GroupAuthenticated}}, Verb: "get", Resource: "nodes", Subresource: "metrics", Name: "n1", Path: "/metrics"}, a)
	code, body = do("t1", "/containerLogs/default/web/app")
	assert.Equal(t, http.StatusForbidden, code)
	assert.Equal(t, "Forbidden (user=prometheus, verb=get, resource=nodes, subresource(s)=[proxy])\n", body)
	code, body = do("t1", "/pods")
	assert.Equal(t, http.StatusForbidden, code)
	assert.Equal(t, "Forbidden (user=prometheus, verb=get, resource=nodes, subresource(s)=[pods proxy])\n", body)
	code, _ = do("t2", "/containerLogs/default/web/app")
	assert.Equal(t, http.StatusOK, code)
}

// grants allows the subresources it lists, to anyone.
type grants map[string]bool

func (g grants) Authorize(_ context.Context, a server.Attributes) (bool, string, error) {
	return g[a.Subresource], "", nil
}

// As the kubelet's fine-grained authorization (locked on since v1.37): the
// pod, health and config endpoints are allowed by their own subresource or
// by proxy.
func TestAuthAllowsTheKubeletsSubresources(t *testing.T) {
	for _, tc := range []struct {
		name    string
		path    string
		granted string
		code    int
	}{
		{"/pods by nodes/pods", "/pods", "pods", http.StatusOK},
		{"/pods by nodes/proxy", "/pods", "proxy", http.StatusOK},
		{"/runningpods/ by nodes/pods", "/runningpods/", "pods", http.StatusOK},
		{"/runningpods/ by nodes/proxy", "/runningpods/", "proxy", http.StatusOK},
		{"/healthz by nodes/healthz", "/healthz", "healthz", http.StatusOK},
		{"/healthz by nodes/proxy", "/healthz", "proxy", http.StatusOK},
		{"/metrics only by nodes/metrics", "/metrics", "proxy", http.StatusForbidden},
		{"/pods not by nodes/metrics", "/pods", "metrics", http.StatusForbidden},
		{"logs only by nodes/proxy", "/containerLogs/default/web/app", "pods", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *server.Config) {
				c.Auth = &server.Auth{Authenticator: tokenAuth{"t": "someone"}, Authorizer: grants{tc.granted: true}, NodeName: "n1"}
			})
			req, err := http.NewRequest(http.MethodGet, f.srv.URL+tc.path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer t")
			resp, err := f.srv.Client().Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, tc.code, resp.StatusCode)
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, c := range map[string]server.Config{
		"no pods":                {},
		"auth without its parts": {Pods: podList{}, Auth: &server.Auth{}},
		"check named ping":       {Pods: podList{}, HealthChecks: []server.HealthCheck{{Name: "ping", Check: func() error { return nil }}}},
		"check without func":     {Pods: podList{}, HealthChecks: []server.HealthCheck{{Name: "x"}}},
	} {
		_, err := server.New(c)
		assert.ErrorIs(t, err, server.ErrInvalidConfig, name)
	}
}

func TestListenAndServeWithTLSStopsWithItsContext(t *testing.T) {
	// borrow httptest's self-signed certificate
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	cert := ts.TLS.Certificates
	ts.Close()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Serve(ctx, l, server.HealthzHandler(), &tls.Config{Certificates: cert, MinVersion: tls.VersionTLS12})
	}()
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the test's own self-signed certificate
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://" + l.Addr().String() + "/healthz")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "ok", string(b))
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

func TestListenAndServeRefusesABusyAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	err = server.ListenAndServe(context.Background(), l.Addr().String(), server.HealthzHandler(), nil)
	assert.Error(t, err)
}
