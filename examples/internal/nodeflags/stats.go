package nodeflags

import (
	"context"

	"github.com/go-logr/logr"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/stats"
)

// Stats is the node's one stats source: what /stats/summary and
// /metrics/resource serve and what the eviction manager watches.
type Stats struct {
	Summary server.StatsProvider
	Metrics server.ResourceMetricsProvider
	// Eviction is the Summary API as the eviction manager reads it.
	Eviction eviction.SummaryProvider
	// provider is package stats' provider, nil for a runtime's own stats.
	provider *stats.Provider
}

// NewStats returns the stats of rt: a runtime's own (a virtual-kubelet
// provider's), else package stats' over the runtime and the host.
func NewStats(nodeName string, rt runtime.Runtime, log logr.Logger) (*Stats, error) {
	if sp, ok := rt.(interface {
		server.StatsProvider
		server.ResourceMetricsProvider
	}); ok {
		return &Stats{Summary: sp, Metrics: sp, Eviction: eviction.SummaryProviderFunc(func(ctx context.Context, _ bool) (*statsapi.Summary, error) {
			return sp.GetStatsSummary(ctx)
		})}, nil
	}
	p, err := stats.New(stats.Config{NodeName: nodeName, Runtime: rt, Log: log})
	if err != nil {
		return nil, err
	}
	return &Stats{Summary: p, Metrics: p, Eviction: eviction.SummaryProviderFunc(p.Summary), provider: p}, nil
}

// Run takes the samples CPU rates are computed from, every 10s, until ctx
// ends. Not needed beside an eviction manager, whose passes take them: two
// samplers would muddle the rates' interval.
func (s *Stats) Run(ctx context.Context) error {
	if s == nil || s.provider == nil {
		return nil
	}
	return s.provider.Run(ctx)
}
