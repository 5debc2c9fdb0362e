package objectstest

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
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
	rv       int
	watchers map[*watcher]struct{}
}

// New returns an empty API.
func New() *API {
	return &API{objs: map[string]map[string]any{}, errs: map[string]error{}, requests: map[string]int{}, watchers: map[*watcher]struct{}{}}
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
	a.rv++
	o := deepCopy(obj)
	setRV(o, a.rv)
	_, existed := a.objs[res][ns+"/"+name]
	a.objs[res][ns+"/"+name] = o
	typ := watch.Added
	if existed {
		typ = watch.Modified
	}
	a.notifyLocked(res, ns, name, typ, o)
}

// Delete removes the object of resource ("configmaps", "secrets",
// "services", "serviceaccounts") namespace/name.
func (a *API) Delete(resource, namespace, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.objs[resource][namespace+"/"+name]
	if !ok {
		return
	}
	delete(a.objs[resource], namespace+"/"+name)
	a.rv++
	o = deepCopy(o)
	setRV(o, a.rv)
	a.notifyLocked(resource, namespace, name, watch.Deleted, o)
}

// CloseWatches ends every open watch, as an apiserver does when a watch
// times out; clients watch again.
func (a *API) CloseWatches() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for w := range a.watchers {
		w.closeLocked()
	}
}

// Watches returns how many watches are open.
func (a *API) Watches() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.watchers)
}

// watcher is one open watch on a resource, optionally on one name.
type watcher struct {
	a            *API
	resource, ns string
	name         string
	ch           chan watch.Event
	closed       bool
}

func (w *watcher) ResultChan() <-chan watch.Event { return w.ch }

func (w *watcher) Stop() {
	w.a.mu.Lock()
	defer w.a.mu.Unlock()
	w.closeLocked()
}

func (w *watcher) closeLocked() {
	if !w.closed {
		w.closed = true
		close(w.ch)
		delete(w.a.watchers, w)
	}
}

// notifyLocked sends an event to the matching watches; a watch whose
// buffer is full is closed, as a slow watcher is by an apiserver. a.mu is
// held.
func (a *API) notifyLocked(resource, ns, name string, typ watch.EventType, obj any) {
	ro, ok := obj.(k8sruntime.Object)
	if !ok {
		return
	}
	for w := range a.watchers {
		if w.resource != resource || w.ns != ns || (w.name != "" && w.name != name) {
			continue
		}
		select {
		case w.ch <- watch.Event{Type: typ, Object: ro.DeepCopyObject()}:
		default:
			w.closeLocked()
		}
	}
}

func (a *API) watch(resource, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests["watch "+resource]++
	if err := a.errs["watch "+resource]; err != nil {
		return nil, err
	}
	w := &watcher{a: a, resource: resource, ns: ns, ch: make(chan watch.Event, 64)}
	if opts.FieldSelector != "" {
		sel, err := fields.ParseSelector(opts.FieldSelector)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		name, ok := sel.RequiresExactMatch("metadata.name")
		if !ok {
			return nil, apierrors.NewBadRequest("only metadata.name field selectors are supported")
		}
		w.name = name
	}
	a.watchers[w] = struct{}{}
	if opts.ResourceVersion == "" {
		// From now: the current state first, as an apiserver sends it.
		for key, o := range a.objs[resource] {
			ons, oname, _ := strings.Cut(key, "/")
			if ons == ns && (w.name == "" || w.name == oname) {
				select {
				case w.ch <- watch.Event{Type: watch.Added, Object: deepCopy(o).(k8sruntime.Object)}:
				default:
					w.closeLocked()
				}
			}
		}
	}
	return w, nil
}

func setRV(obj any, rv int) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(strconv.Itoa(rv))
	}
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

func (c configMaps) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.a.watch("configmaps", c.ns, opts)
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

func (c secrets) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.a.watch("secrets", c.ns, opts)
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

func (c services) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.a.watch("services", c.ns, opts)
}

func (c services) List(_ context.Context, _ metav1.ListOptions) (*v1.ServiceList, error) {
	a := c.a
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests["list services"]++
	if err := a.errs["list services"]; err != nil {
		return nil, err
	}
	l := &v1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(a.rv)}}
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
