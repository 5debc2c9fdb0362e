package provider_test

import (
	"context"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/provider/providertest"
	"github.com/nodekit/nodekit/runtime"
)

// typedStats is a provider with GetStatsSummary over the kubelet's type.
type typedStats struct{ *providertest.Provider }

func (typedStats) GetStatsSummary(context.Context) (*statsapi.Summary, error) {
	return &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "vk",
		CPU: &statsapi.CPUStats{Time: metav1.NewTime(t0), UsageCoreNanoSeconds: ptr.To[uint64](3e9)}}}, nil
}

// vkSummary stands for virtual-kubelet's copy of the Summary type
// (node/api/statsv1alpha1): the same JSON, another Go type.
type vkSummary struct {
	Node struct {
		NodeName string `json:"nodeName"`
		CPU      *struct {
			Time                 metav1.Time `json:"time"`
			UsageCoreNanoSeconds *uint64     `json:"usageCoreNanoSeconds,omitempty"`
		} `json:"cpu,omitempty"`
	} `json:"node"`
	Pods []struct{} `json:"pods"`
}

type vkStats struct {
	*providertest.Provider
	err error
}

func (p vkStats) GetStatsSummary(context.Context) (*vkSummary, error) {
	if p.err != nil {
		return nil, p.err
	}
	s := &vkSummary{}
	s.Node.NodeName = "vk"
	s.Node.CPU = &struct {
		Time                 metav1.Time `json:"time"`
		UsageCoreNanoSeconds *uint64     `json:"usageCoreNanoSeconds,omitempty"`
	}{metav1.NewTime(t0), ptr.To[uint64](3e9)}
	return s, nil
}

// ownMetrics is a provider with its own GetMetricsResource.
type ownMetrics struct{ typedStats }

func (ownMetrics) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return []*dto.MetricFamily{{Name: ptr.To("custom")}}, nil
}

// badShape has a GetStatsSummary of another shape, which is not taken.
type badShape struct{ *providertest.Provider }

func (badShape) GetStatsSummary() string { return "" }

func TestProviderStats(t *testing.T) {
	for _, tc := range []struct {
		name        string
		p           provider.PodLifecycleHandler
		wantErr     error
		wantMetrics []string
	}{
		{"the kubelet's type", typedStats{providertest.New(nil)}, nil, []string{"node_cpu_usage_seconds_total", "resource_scrape_error"}},
		{"virtual-kubelet's copy of the type, through JSON", vkStats{Provider: providertest.New(nil)}, nil, []string{"node_cpu_usage_seconds_total", "resource_scrape_error"}},
		{"the provider's own resource metrics win", ownMetrics{typedStats{providertest.New(nil)}}, nil, []string{"custom"}},
		{"the provider's error", vkStats{Provider: providertest.New(nil), err: errors.New("boom")}, errors.New("boom"), []string{"resource_scrape_error"}},
		{"no stats", providertest.New(nil), runtime.ErrNotSupported, nil},
		{"a method of another shape is no stats", badShape{providertest.New(nil)}, runtime.ErrNotSupported, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, err := provider.New(provider.Config{Provider: tc.p})
			require.NoError(t, err)
			s, err := rt.GetStatsSummary(context.Background())
			if tc.wantErr != nil {
				if errors.Is(tc.wantErr, runtime.ErrNotSupported) {
					assert.ErrorIs(t, err, runtime.ErrNotSupported)
				} else {
					assert.ErrorContains(t, err, tc.wantErr.Error())
				}
			} else {
				require.NoError(t, err)
				assert.Equal(t, "vk", s.Node.NodeName)
				assert.Equal(t, uint64(3e9), *s.Node.CPU.UsageCoreNanoSeconds)
				assert.Equal(t, t0, s.Node.CPU.Time.Time.UTC().Truncate(time.Second))
			}
			mfs, err := rt.GetMetricsResource(context.Background())
			if tc.wantMetrics == nil {
				assert.ErrorIs(t, err, runtime.ErrNotSupported)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, mf := range mfs {
				names = append(names, mf.GetName())
			}
			assert.Equal(t, tc.wantMetrics, names)
		})
	}
}
