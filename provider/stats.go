package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	dto "github.com/prometheus/client_model/go"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/stats"
)

// PodStatsSummaryProvider is virtual-kubelet's optional stats method
// (node/api's PodStatsSummaryHandlerFunc) over the kubelet's Summary
// type. virtual-kubelet's own providers return its copy of the type
// (node/api/statsv1alpha1), which Go does not take as this one: Runtime
// finds their GetStatsSummary by name and converts the result through its
// JSON, which is the kubelet's.
type PodStatsSummaryProvider interface {
	GetStatsSummary(context.Context) (*statsapi.Summary, error)
}

// PodMetricsResourceProvider is virtual-kubelet's optional
// /metrics/resource method (node/api's PodMetricsResourceHandlerFunc).
type PodMetricsResourceProvider interface {
	GetMetricsResource(context.Context) ([]*dto.MetricFamily, error)
}

// GetStatsSummary is the provider's stats summary, which the kubelet API
// (package server) serves on /stats/summary; a provider without
// GetStatsSummary gives an error wrapping runtime.ErrNotSupported.
func (r *Runtime) GetStatsSummary(ctx context.Context) (*statsapi.Summary, error) {
	if r.summary == nil {
		return nil, fmt.Errorf("provider: no GetStatsSummary: %w", runtime.ErrNotSupported)
	}
	return r.summary(ctx)
}

// GetMetricsResource is the provider's resource metrics, which the kubelet
// API serves on /metrics/resource: its own GetMetricsResource, else the
// kubelet's resource metrics over its GetStatsSummary, else an error
// wrapping runtime.ErrNotSupported.
func (r *Runtime) GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	if p, ok := r.p.(PodMetricsResourceProvider); ok {
		return p.GetMetricsResource(ctx)
	}
	if r.summary == nil {
		return nil, fmt.Errorf("provider: no GetMetricsResource or GetStatsSummary: %w", runtime.ErrNotSupported)
	}
	return stats.GatherResourceMetrics(ctx, r.summary)
}

var (
	ctxType   = reflect.TypeFor[context.Context]()
	errorType = reflect.TypeFor[error]()
)

// summaryFunc finds p's GetStatsSummary: PodStatsSummaryProvider's, or
// one of the same shape returning another struct (virtual-kubelet's
// statsv1alpha1.Summary), converted through JSON. nil without.
func summaryFunc(p PodLifecycleHandler) stats.SummaryFunc {
	if sp, ok := p.(PodStatsSummaryProvider); ok {
		return sp.GetStatsSummary
	}
	m := reflect.ValueOf(p).MethodByName("GetStatsSummary")
	if !m.IsValid() {
		return nil
	}
	t := m.Type()
	if t.NumIn() != 1 || t.In(0) != ctxType || t.NumOut() != 2 || t.Out(1) != errorType ||
		t.Out(0).Kind() != reflect.Pointer || t.Out(0).Elem().Kind() != reflect.Struct {
		return nil
	}
	return func(ctx context.Context) (*statsapi.Summary, error) {
		out := m.Call([]reflect.Value{reflect.ValueOf(&ctx).Elem()})
		if err, _ := out[1].Interface().(error); err != nil {
			return nil, err
		}
		if out[0].IsNil() {
			return nil, errors.New("provider: GetStatsSummary returned no summary")
		}
		b, err := json.Marshal(out[0].Interface())
		if err != nil {
			return nil, fmt.Errorf("provider: GetStatsSummary: %w", err)
		}
		var s statsapi.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("provider: GetStatsSummary's summary is not the kubelet's: %w", err)
		}
		return &s, nil
	}
}
