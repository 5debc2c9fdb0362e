package main

import (
	"net/http"
	"strings"
	"testing"
)

// The agent serves the stats of its node and pods, on the API port and the
// read-only one, as the kubelet.
func TestServesStats(t *testing.T) {
	ap, rp := freePort(t), freePort(t)
	s := start(t, "-pod-manifest-path", "manifests/web.yaml", "-node-name", "test-node", "-healthz-port", "0", "-port", ap, "-read-only-port", rp)
	s.waitFrame(t, "web running", func(f string) bool { return matches(f, []want{{"web-test-node", "web", "Running", "running"}}) })

	for _, port := range []string{ap, rp} {
		code, body := httpGet(t, "http://127.0.0.1:"+port+"/stats/summary")
		if code != http.StatusOK || !strings.Contains(body, `"nodeName": "test-node"`) || !strings.Contains(body, `"name": "web-test-node"`) {
			t.Errorf(":%s/stats/summary: %d %.300s", port, code, body)
		}
		code, body = httpGet(t, "http://127.0.0.1:"+port+"/metrics/resource")
		if code != http.StatusOK || !strings.Contains(body, `container_memory_working_set_bytes{container="web",namespace="default",pod="web-test-node"}`) {
			t.Errorf(":%s/metrics/resource: %d %.600s", port, code, body)
		}
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
}
