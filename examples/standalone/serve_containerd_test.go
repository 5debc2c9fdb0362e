package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/internal/testenv"
)

// TestContainerLogsOnContainerd is `kubectl logs` through the agent: a
// container on containerd prints lines; the agent's /containerLogs tails
// and follows them from the CRI log file, and /metrics counts the CRI
// calls under the kubelet's runtime operation names.
func TestContainerLogsOnContainerd(t *testing.T) {
	endpoint := testenv.ExclusiveCRIEndpoint(t)
	image, pause := testenv.TestImage(t), testenv.PauseImage(t)
	node := uniqueNode("serve-e2e-")
	dir := t.TempDir()
	manifest := `apiVersion: v1
kind: Pod
metadata: {name: talker}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: talk, image: IMAGE, command: [sh, -c, "trap 'exit 0' TERM; i=0; while true; do i=$((i+1)); echo line $i; sleep 0.2; done"]}
`
	if err := os.WriteFile(filepath.Join(dir, "talker.yaml"), []byte(strings.ReplaceAll(manifest, "IMAGE", image)), 0o644); err != nil {
		t.Fatal(err)
	}
	ap := freePort(t)
	s := start(t, "-cri", endpoint, "-pause-image", pause, "-pod-manifest-path", dir, "-node-name", node,
		"-pod-logs-root", t.TempDir(), "-pods-root", t.TempDir(), "-healthz-port", "0", "-port", ap)
	pod := "talker-" + node
	s.waitFrame(t, "talker running", func(f string) bool { return matches(f, []want{{pod, "talk", "Running", "running"}}) })
	base := "http://127.0.0.1:" + ap + "/containerLogs/default/" + pod + "/talk"

	var body string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var code int
		code, body = httpGet(t, base+"?tailLines=2")
		if code == http.StatusOK && strings.Count(body, "\n") == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tail: %d %q", code, body)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		if !strings.HasPrefix(l, "line ") {
			t.Errorf("tailed line %q is not the container's output", l)
		}
	}

	// follow: lines keep coming; the request ends when the client goes
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"?follow=true&tailLines=1", nil)
	client := &http.Client{}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	var got []string
	for len(got) < 3 && sc.Scan() {
		got = append(got, sc.Text())
	}
	cancel()
	resp.Body.Close()
	client.CloseIdleConnections()
	if len(got) < 3 {
		t.Fatalf("follow gave %q", got)
	}
	first, _ := strconv.Atoi(strings.TrimPrefix(got[0], "line "))
	last, _ := strconv.Atoi(strings.TrimPrefix(got[2], "line "))
	if last != first+2 {
		t.Errorf("followed lines %q are not consecutive new output", got)
	}

	_, metrics := httpGet(t, "http://127.0.0.1:"+ap+"/metrics")
	for _, want := range []string{`kubelet_runtime_operations_total{operation_type="run_podsandbox"} 1`, `kubelet_runtime_operations_total{operation_type="container_status"}`,
		`kubelet_runtime_operations_duration_seconds_count{operation_type="list_podsandbox"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
}
