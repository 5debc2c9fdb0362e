package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/runtime"
)

// StatsProvider builds the kubelet's stats Summary for /stats/summary;
// *stats.Provider fits, and so do virtual-kubelet providers (its
// PodStatsSummaryHandlerFunc's shape) and *provider.Runtime.
type StatsProvider interface {
	GetStatsSummary(ctx context.Context) (*statsapi.Summary, error)
}

// CPUAndMemoryStatsProvider is a StatsProvider with a cheaper summary of
// CPU and memory alone, served for ?only_cpu_and_memory=true (without it
// the full summary is).
type CPUAndMemoryStatsProvider interface {
	GetCPUAndMemoryStats(ctx context.Context) (*statsapi.Summary, error)
}

// ResourceMetricsProvider gathers /metrics/resource, the kubelet's
// resource metrics, in virtual-kubelet's PodMetricsResourceHandlerFunc
// shape; *stats.Provider and *provider.Runtime fit.
type ResourceMetricsProvider interface {
	GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error)
}

// getStatsSummary serves /stats/summary (GET and POST, as the kubelet's):
// the summary in JSON, CPU and memory only with only_cpu_and_memory=true
// in the query or a form. A provider that cannot answer
// (runtime.ErrNotSupported) gets 404, any other error 500 "Internal Error:
// ...", as the kubelet's.
func (s *Server) getStatsSummary(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.statsError(w, fmt.Errorf("parse form failed: %w", err))
		return
	}
	get := s.cfg.Stats.GetStatsSummary
	if v, ok := r.Form["only_cpu_and_memory"]; ok && len(v) == 1 && v[0] == "true" {
		if cm, ok := s.cfg.Stats.(CPUAndMemoryStatsProvider); ok {
			get = cm.GetCPUAndMemoryStats
		}
	}
	summary, err := get(r.Context())
	if err != nil {
		s.statsError(w, err)
		return
	}
	// Indented with one space, as the kubelet's go-restful writes it.
	data, err := json.MarshalIndent(summary, "", " ")
	if err != nil {
		s.statsError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

func (s *Server) statsError(w http.ResponseWriter, err error) {
	if errors.Is(err, runtime.ErrNotSupported) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	s.log.Error(err, "HTTP InternalServerError serving", "request", "/stats/summary")
	http.Error(w, "Internal Error: "+err.Error(), http.StatusInternalServerError)
}

// resourceMetrics serves /metrics/resource over the request's context; a
// provider that has none (runtime.ErrNotSupported) gets 404.
func (s *Server) resourceMetrics() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mfs, err := s.cfg.ResourceMetrics.GetMetricsResource(r.Context())
		if errors.Is(err, runtime.ErrNotSupported) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, err })
		promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	})
}
