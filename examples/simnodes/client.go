package main

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
)

// clientset reaches the two API groups the nodes use (core/v1 and
// coordination.k8s.io/v1) through client-go's generic typed client
// (gentype) over one shared HTTP client and rate limiter, with a scheme of
// those groups only, as examples/kubenode's. client-go's generated
// clientset, its scheme and its informer factory register all 55 API
// groups, whose types, codecs and deep copies are then linked and mostly
// resident: tens of MiB a process, which at 100 nodes a process is more
// than the nodes (docs/performance.md, issue 32).
type clientset struct {
	scheme *runtime.Scheme
	params runtime.ParameterCodec
	core   rest.Interface // the legacy group, /api/v1
	coord  rest.Interface
}

// newScheme registers core/v1, coordination/v1 and the options types of
// metav1 (for query parameters).
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, coordinationv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s, nil
}

// newClients makes the clients for cfg; they share one rate limiter at
// cfg's QPS and burst, as a generated clientset's groups do, and at most
// maxInFlight requests open at once besides watches (0: no bound).
func newClients(cfg *rest.Config, maxInFlight int) (*clientset, error) {
	s, err := newScheme()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if maxInFlight > 0 {
		cfg.Wrap(limitInFlight(maxInFlight))
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(s)
	cs := &clientset{scheme: s, params: runtime.NewParameterCodec(s)}
	for _, g := range []struct {
		rc *rest.Interface
		gv schema.GroupVersion
	}{
		{&cs.core, v1.SchemeGroupVersion},
		{&cs.coord, coordinationv1.SchemeGroupVersion},
	} {
		c := *cfg
		c.GroupVersion = &g.gv
		c.APIPath = "/apis"
		if g.gv.Group == "" {
			c.APIPath = "/api"
		}
		c.NegotiatedSerializer = codecs.WithoutConversion()
		if *g.rc, err = rest.RESTClientForConfigAndClient(&c, hc); err != nil {
			return nil, fmt.Errorf("client for %s: %w", g.gv, err)
		}
	}
	return cs, nil
}

// serverVersion checks that the apiserver answers GET /version.
func (c *clientset) serverVersion(ctx context.Context) error {
	return c.core.Get().AbsPath("/version").Do(ctx).Error()
}

type (
	podClient   = gentype.ClientWithList[*v1.Pod, *v1.PodList]
	nodeClient  = gentype.ClientWithList[*v1.Node, *v1.NodeList]
	leaseClient = gentype.Client[*coordinationv1.Lease]
	eventClient = gentype.Client[*v1.Event]
)

func (c *clientset) Pods(ns string) *podClient {
	return gentype.NewClientWithList("pods", c.core, c.params, ns,
		func() *v1.Pod { return &v1.Pod{} }, func() *v1.PodList { return &v1.PodList{} },
		gentype.PrefersProtobuf[*v1.Pod]())
}

func (c *clientset) Nodes() *nodeClient {
	return gentype.NewClientWithList("nodes", c.core, c.params, "",
		func() *v1.Node { return &v1.Node{} }, func() *v1.NodeList { return &v1.NodeList{} },
		gentype.PrefersProtobuf[*v1.Node]())
}

func (c *clientset) Leases(ns string) *leaseClient {
	return gentype.NewClient("leases", c.coord, c.params, ns,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		gentype.PrefersProtobuf[*coordinationv1.Lease]())
}

// listWatch is what an informer of every pod or Node needs, over c's
// typed clients (the informer factory's, without its 55 groups).
func listWatch[T runtime.Object](list func(context.Context, metav1.ListOptions) (T, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), tweak func(*metav1.ListOptions)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return watchFn(ctx, o)
		},
	}
}

// eventSink is client-go's record.EventSink over the events of each
// event's own namespace, as typed core/v1's EventSinkImpl.
type eventSink struct {
	c   *clientset
	ctx context.Context
}

func (e eventSink) events(ns string) *eventClient {
	return gentype.NewClient("events", e.c.core, e.c.params, ns,
		func() *v1.Event { return &v1.Event{} }, gentype.PrefersProtobuf[*v1.Event]())
}

func (e eventSink) Create(ev *v1.Event) (*v1.Event, error) {
	return e.events(ev.Namespace).Create(e.ctx, ev, metav1.CreateOptions{})
}

func (e eventSink) Update(ev *v1.Event) (*v1.Event, error) {
	return e.events(ev.Namespace).Update(e.ctx, ev, metav1.UpdateOptions{})
}

func (e eventSink) Patch(ev *v1.Event, data []byte) (*v1.Event, error) {
	return e.events(ev.Namespace).Patch(e.ctx, ev.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}
