package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/internal/testenv"
)

// freePort returns a port free a moment ago, as a flag value.
func freePort(t *testing.T) string { return strconv.Itoa(testenv.FreePort(t)) }

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// kubeletMetrics are the kubelet's metric names a scrape of the agent on the
// in-memory runtime shows once its pods run.
var kubeletMetrics = []string{
	"kubelet_node_name", "kubelet_pleg_relist_duration_seconds", "kubelet_pleg_relist_interval_seconds",
	"kubelet_pleg_last_seen_seconds", "kubelet_pleg_discard_events", "kubelet_running_pods", "kubelet_running_containers",
	"kubelet_pod_worker_duration_seconds", "kubelet_restarted_pods_total", "kubelet_started_pods_total",
	"kubelet_started_containers_total", "kubelet_pod_start_duration_seconds", "go_goroutines", "process_cpu_seconds_total",
}

func TestServesTheKubeletsEndpoints(t *testing.T) {
	hp, ap, rp := freePort(t), freePort(t), freePort(t)
	s := start(t, "-pod-manifest-path", "manifests/web.yaml", "-node-name", "test-node",
		"-healthz-port", hp, "-port", ap, "-read-only-port", rp)
	s.waitFrame(t, "web running", func(f string) bool { return matches(f, []want{{"web-test-node", "web", "Running", "running"}}) })

	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := httpGet(t, "http://127.0.0.1:"+hp+"/healthz")
		if code == http.StatusOK && body == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz port: %d %q\nstderr:\n%s", code, body, s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := httpGet(t, "http://127.0.0.1:"+ap+"/healthz?verbose"); code != http.StatusOK || !strings.Contains(body, "[+]syncloop ok\n[+]pleg ok\n") {
		t.Errorf("API healthz: %d %q", code, body)
	}
	code, body := httpGet(t, "http://127.0.0.1:"+ap+"/pods")
	if code != http.StatusOK || !strings.Contains(body, `"kind":"PodList"`) || !strings.Contains(body, `"name":"web-test-node"`) || !strings.Contains(body, `"phase":"Running"`) {
		t.Errorf("/pods: %d %.300s", code, body)
	}
	if code, body := httpGet(t, "http://127.0.0.1:"+ap+"/runningpods/"); code != http.StatusOK || !strings.Contains(body, `"name":"web-test-node"`) {
		t.Errorf("/runningpods/: %d %.300s", code, body)
	}
	var metrics string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, metrics = httpGet(t, "http://127.0.0.1:"+ap+"/metrics")
		if strings.Contains(metrics, "kubelet_pod_start_duration_seconds_count 1") || time.Now().After(deadline) {
			break
		}
	}
	for _, name := range kubeletMetrics {
		if !regexp.MustCompile(`(?m)^# TYPE ` + name + ` `).MatchString(metrics) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if !strings.Contains(metrics, `kubelet_running_containers{container_state="running"} 1`) {
		t.Errorf("/metrics does not count web's running container:\n%s", grepKubelet(metrics))
	}
	// the in-memory runtime keeps (empty) logs: the endpoint answers
	if code, body := httpGet(t, "http://127.0.0.1:"+ap+"/containerLogs/default/web-test-node/web?tailLines=5"); code != http.StatusOK {
		t.Errorf("/containerLogs on the in-memory runtime: %d %q", code, body)
	}
	if code, body := httpGet(t, "http://127.0.0.1:"+ap+"/containerLogs/default/web-test-node/nope"); code != http.StatusNotFound || body != "container \"nope\" not found in pod \"web-test-node\"\n" {
		t.Errorf("/containerLogs of an unknown container: %d %q", code, body)
	}
	// the read-only port: pods and metrics, nothing that reads logs
	if code, _ := httpGet(t, "http://127.0.0.1:"+rp+"/pods"); code != http.StatusOK {
		t.Errorf("read-only /pods: %d", code)
	}
	if code, _ := httpGet(t, "http://127.0.0.1:"+rp+"/runningpods/"); code != http.StatusNotFound {
		t.Errorf("read-only /runningpods/: %d, want 404", code)
	}
	if code, _ := httpGet(t, "http://127.0.0.1:"+rp+"/containerLogs/default/web-test-node/web"); code != http.StatusNotFound {
		t.Errorf("read-only /containerLogs: %d, want 404", code)
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	if code, _ := httpGet(t, "http://127.0.0.1:"+hp+"/healthz"); code != 0 {
		t.Errorf("healthz still served after the program stopped: %d", code)
	}
}

func grepKubelet(metrics string) string {
	var out []string
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, "kubelet_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestServeFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"port out of range", []string{"-port", "70000"}, "-port 70000 is not a port"},
		{"negative healthz port", []string{"-healthz-port", "-1"}, "-healthz-port -1 is not a port"},
		{"address that is no IP", []string{"-address", "localhost"}, `-address "localhost" is not an IP address`},
		{"key without certificate", []string{"-tls-private-key-file", "k.pem"}, "go together"},
		{"all interfaces without TLS", []string{"-address", "0.0.0.0"}, "-address 0.0.0.0 is not loopback"},
		{"missing certificate files", []string{"-tls-cert-file", "no.pem", "-tls-private-key-file", "no.key"}, "-tls-cert-file: open no.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, append([]string{"-pod-manifest-path", "manifests", "-node-name", "n", "-duration", "1ms"}, tc.args...), &stdout, &stderr)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error containing %q", err, tc.want)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, f := range []string{"address", "port", "read-only-port", "healthz-port", "healthz-bind-address", "tls-cert-file", "tls-private-key-file"} {
		if !regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(f) + `\b`).MatchString(stderr.String()) {
			t.Errorf("-h does not document -%s", f)
		}
	}
}
