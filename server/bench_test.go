package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/server"
)

// BenchmarkPods serves /pods with the kubelet's default maximum of 110 pods,
// each with two containers and a status.
func BenchmarkPods(b *testing.B) {
	pods := make(podList, 110)
	for i := range pods {
		p := testPod()
		p.Name, p.UID = fmt.Sprintf("web-%03d", i), types.UID(fmt.Sprintf("uid-%03d", i))
		p.Labels = map[string]string{"app": "web", "tier": "frontend"}
		p.CreationTimestamp = metav1.Now()
		pods[i] = p
	}
	s, err := server.New(server.Config{Pods: pods})
	if err != nil {
		b.Fatal(err)
	}
	h := s.Handler()
	req := httptest.NewRequest(http.MethodGet, "/pods", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}

// BenchmarkMetricsScrape serves /metrics with every metric an agent keeps
// (its own, the PLEG's and the pod workers') registered, plus the Go and
// process collectors a program usually adds.
func BenchmarkMetricsScrape(b *testing.B) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rt, err := fake.New(fake.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := agent.New(agent.Config{NodeName: "n1", Runtime: rt, Registerer: reg}); err != nil {
		b.Fatal(err)
	}
	s, err := server.New(server.Config{Pods: podList{}, Metrics: reg})
	if err != nil {
		b.Fatal(err)
	}
	h := s.Handler()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
