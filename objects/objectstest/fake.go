package objectstest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/objects"
)

// API is an in-memory apiserver for configMaps, secrets, services and
// service-account tokens. Its per-namespace clients satisfy the objects
// package's interfaces. Safe for concurrent use.
type API struct {
	// CreateTokenFunc, when set, answers CreateToken instead of the default,
	// which issues "token-<n>" valid for the requested seconds (default
	// 3600) from Clock's now, for any service account that exists.
	CreateTokenFunc func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	// Clock stamps issued tokens. Default the real clock.
	Clock clock.PassiveClock

	mu       sync.Mutex
	objs     map[string]map[string]any // resource -> namespace/name -> object
	errs     map[string]error
	requests map[string]int
	issued   int
}

// New returns an empty API.
func New() *API {
	return &API{objs: map[string]map[string]any{}, errs: map[string]error{}, requests: map[string]int{}}
}

// Set stores a *v1.ConfigMap, *v1.Secret, *v1.Service or *v1.ServiceAccount
// (a copy), replacing one with the same namespace and name.
func (a *API) Set(obj any) {
	res, ns, name := resourceOf(obj)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.objs[res] == nil {
		a.objs[res] = map[string]any{}
	}
	a.objs[res][ns+"/"+name] = deepCopy(obj)
}

// Delete removes the object of resource ("configmaps", "secrets",
// "services", "serviceaccounts") namespace/name.
func (a *API) Delete(resource, namespace, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.objs[resource], namespace+"/"+name)
}

// InjectError makes every request of verb ("get", "list", "create") on
// resource fail with err until it is injected again with nil.
func (a *API) InjectError(verb, resource string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs[verb+" "+resource] = err
}

// Requests returns how many requests each "verb resource" got.
func (a *API) Requests() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.requests))
	for k, v := range a.requests {
		out[k] = v
	}
	return out
}

// TotalRequests returns how many requests the API got in all.
func (a *API) TotalRequests() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, v := range a.requests {
		n += v
	}
	return n
}

// ConfigMaps returns the configMap client of namespace.
func (a *API) ConfigMaps(namespace string) objects.ConfigMapGetter {
	return configMaps{a, namespace}
}

// Secrets returns the secret client of namespace.
func (a *API) Secrets(namespace string) objects.SecretGetter { return secrets{a, namespace} }

// Services returns the service client of namespace.
func (a *API) Services(namespace string) objects.ServiceLister { return services{a, namespace} }

// ServiceAccounts returns the service-account client of namespace.
func (a *API) ServiceAccounts(namespace string) objects.TokenCreator {
	return serviceAccounts{a, namespace}
}

func (a *API) get(verb, resource, namespace, name string) (any, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests[verb+" "+resource]++
	if err := a.errs[verb+" "+resource]; err != nil {
		return nil, err
	}
	o, ok := a.objs[resource][namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(v1.Resource(resource), name)
	}
	return deepCopy(o), nil
}

type configMaps struct {
	a  *API
	ns string
}

func (c configMaps) Get(_ context.Context, name string, _ metav1.GetOptions) (*v1.ConfigMap, error) {
	o, err := c.a.get("get", "configmaps", c.ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*v1.ConfigMap), nil
}

type secrets struct {
	a  *API
	ns string
}

func (c secrets) Get(_ context.Context, name string, _ metav1.GetOptions) (*v1.Secret, error) {
	o, err := c.a.get("get", "secrets", c.ns, name)
	if err != nil {
		return nil, err
	}
	return o.(*v1.Secret), nil
}

type services struct {
	a  *API
	ns string
}

func (c services) List(_ context.Context, _ metav1.ListOptions) (*v1.ServiceList, error) {
	a := c.a
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests["list services"]++
	if err := a.errs["list services"]; err != nil {
		return nil, err
	}
	l := &v1.ServiceList{}
	var keys []string
	for k, o := range a.objs["services"] {
		if s := o.(*v1.Service); c.ns == "" || s.Namespace == c.ns {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		l.Items = append(l.Items, *a.objs["services"][k].(*v1.Service).DeepCopy())
	}
	return l, nil
}

type serviceAccounts struct {
	a  *API
	ns string
}

func (c serviceAccounts) CreateToken(_ context.Context, name string, tr *authenticationv1.TokenRequest, _ metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	a := c.a
	a.mu.Lock()
	a.requests["create serviceaccounts/token"]++
	err := a.errs["create serviceaccounts/token"]
	_, exists := a.objs["serviceaccounts"][c.ns+"/"+name]
	a.issued++
	n := a.issued
	fn := a.CreateTokenFunc
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if fn != nil {
		return fn(c.ns, name, tr)
	}
	if !exists {
		return nil, apierrors.NewNotFound(v1.Resource("serviceaccounts"), name)
	}
	out := tr.DeepCopy()
	exp := int64(3600)
	if tr.Spec.ExpirationSeconds != nil {
		exp = *tr.Spec.ExpirationSeconds
	}
	out.Spec.ExpirationSeconds = &exp
	now := time.Now()
	if a.Clock != nil {
		now = a.Clock.Now()
	}
	out.Status = authenticationv1.TokenRequestStatus{
		Token:               fmt.Sprintf("token-%d", n),
		ExpirationTimestamp: metav1.NewTime(now.Add(time.Duration(exp) * time.Second)),
	}
	return out, nil
}

func resourceOf(obj any) (string, string, string) {
	switch o := obj.(type) {
	case *v1.ConfigMap:
		return "configmaps", o.Namespace, o.Name
	case *v1.Secret:
		return "secrets", o.Namespace, o.Name
	case *v1.Service:
		return "services", o.Namespace, o.Name
	case *v1.ServiceAccount:
		return "serviceaccounts", o.Namespace, o.Name
	}
	panic(fmt.Sprintf("objectstest: unsupported object %T", obj))
}

func deepCopy(obj any) any {
	switch o := obj.(type) {
	case *v1.ConfigMap:
		return o.DeepCopy()
	case *v1.Secret:
		return o.DeepCopy()
	case *v1.Service:
		return o.DeepCopy()
	case *v1.ServiceAccount:
		return o.DeepCopy()
	}
	return obj
}
