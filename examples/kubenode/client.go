package main

import (
	"context"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// clientset reaches the five API groups the node uses, through
// client-go's generic typed client (gentype) over one shared HTTP client
// and rate limiter, with a scheme of those groups only. client-go's
// generated clients (kubernetes.Clientset, or any one group's) register
// every API group in their scheme, which links every group's types, codecs
// and deep copies: with the clientset's discovery client, 23 of the 54 MB
// of binary mapped, most of it resident (docs/performance.md, what
// kubenode's resident memory is made of).
type clientset struct {
	scheme *runtime.Scheme
	params runtime.ParameterCodec
	core   rest.Interface // the legacy group, /api/v1
	coord  rest.Interface
	certs  rest.Interface
	authn  rest.Interface
	authz  rest.Interface
}

// newScheme registers the groups the node reads and writes, and the
// options types of metav1 (for query parameters), as client-go's scheme
// package does for all groups.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, coordinationv1.AddToScheme,
		certificatesv1.AddToScheme, authenticationv1.AddToScheme, authorizationv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s, nil
}

// newClients makes the node's clients for cfg. They share one rate limiter
// at cfg's QPS and burst, as a generated clientset's groups do.
func newClients(cfg *rest.Config) (*clientset, error) {
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
		{&cs.certs, certificatesv1.SchemeGroupVersion},
		{&cs.authn, authenticationv1.SchemeGroupVersion},
		{&cs.authz, authorizationv1.SchemeGroupVersion},
	} {
		if *g.rc, err = restClient(cfg, hc, codecs, g.gv); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

func restClient(cfg *rest.Config, hc *http.Client, codecs serializer.CodecFactory, gv schema.GroupVersion) (rest.Interface, error) {
	c := *cfg
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = codecs.WithoutConversion()
	rc, err := rest.RESTClientForConfigAndClient(&c, hc)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", gv, err)
	}
	return rc, nil
}

// serverVersion checks that the apiserver answers GET /version.
func (c *clientset) serverVersion(ctx context.Context) error {
	return c.core.Get().AbsPath("/version").Do(ctx).Error()
}

type (
	podClient       = gentype.ClientWithList[*v1.Pod, *v1.PodList]
	nodeClient      = gentype.ClientWithList[*v1.Node, *v1.NodeList]
	secretClient    = gentype.ClientWithList[*v1.Secret, *v1.SecretList]
	configMapClient = gentype.ClientWithList[*v1.ConfigMap, *v1.ConfigMapList]
	serviceClient   = gentype.ClientWithList[*v1.Service, *v1.ServiceList]
	eventClient     = gentype.Client[*v1.Event]
	leaseClient     = gentype.Client[*coordinationv1.Lease]
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

func (c *clientset) Secrets(ns string) *secretClient {
	return gentype.NewClientWithList("secrets", c.core, c.params, ns,
		func() *v1.Secret { return &v1.Secret{} }, func() *v1.SecretList { return &v1.SecretList{} },
		gentype.PrefersProtobuf[*v1.Secret]())
}

func (c *clientset) ConfigMaps(ns string) *configMapClient {
	return gentype.NewClientWithList("configmaps", c.core, c.params, ns,
		func() *v1.ConfigMap { return &v1.ConfigMap{} }, func() *v1.ConfigMapList { return &v1.ConfigMapList{} },
		gentype.PrefersProtobuf[*v1.ConfigMap]())
}

func (c *clientset) Services(ns string) *serviceClient {
	return gentype.NewClientWithList("services", c.core, c.params, ns,
		func() *v1.Service { return &v1.Service{} }, func() *v1.ServiceList { return &v1.ServiceList{} },
		gentype.PrefersProtobuf[*v1.Service]())
}

func (c *clientset) Leases(ns string) *leaseClient {
	return gentype.NewClient("leases", c.coord, c.params, ns,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		gentype.PrefersProtobuf[*coordinationv1.Lease]())
}

func (c *clientset) CertificateSigningRequests() *gentype.Client[*certificatesv1.CertificateSigningRequest] {
	return gentype.NewClient("certificatesigningrequests", c.certs, c.params, "",
		func() *certificatesv1.CertificateSigningRequest { return &certificatesv1.CertificateSigningRequest{} },
		gentype.PrefersProtobuf[*certificatesv1.CertificateSigningRequest]())
}

func (c *clientset) TokenReviews() *gentype.Client[*authenticationv1.TokenReview] {
	return gentype.NewClient("tokenreviews", c.authn, c.params, "",
		func() *authenticationv1.TokenReview { return &authenticationv1.TokenReview{} },
		gentype.PrefersProtobuf[*authenticationv1.TokenReview]())
}

func (c *clientset) SubjectAccessReviews() *gentype.Client[*authorizationv1.SubjectAccessReview] {
	return gentype.NewClient("subjectaccessreviews", c.authz, c.params, "",
		func() *authorizationv1.SubjectAccessReview { return &authorizationv1.SubjectAccessReview{} },
		gentype.PrefersProtobuf[*authorizationv1.SubjectAccessReview]())
}

// ServiceAccounts returns what creates tokens for namespace ns's service
// accounts (the TokenRequest API).
func (c *clientset) ServiceAccounts(ns string) serviceAccounts {
	return serviceAccounts{c: c, ns: ns}
}

type serviceAccounts struct {
	c  *clientset
	ns string
}

// CreateToken is the typed client's: POST .../serviceaccounts/NAME/token.
func (s serviceAccounts) CreateToken(ctx context.Context, name string, tr *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	out := &authenticationv1.TokenRequest{}
	err := s.c.core.Post().UseProtobufAsDefault().Namespace(s.ns).Resource("serviceaccounts").Name(name).
		SubResource("token").VersionedParams(&opts, s.c.params).Body(tr).Do(ctx).Into(out)
	return out, err
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
