package objects

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// ErrNoSource is wrapped when an object is asked for whose kind has no
// client configured (a standalone agent has none).
var ErrNoSource = errors.New("objects: no API source configured")

// ConfigMapGetter reads the configMaps of one namespace; client-go's
// CoreV1().ConfigMaps(ns) satisfies it.
type ConfigMapGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.ConfigMap, error)
}

// SecretGetter reads the secrets of one namespace; client-go's
// CoreV1().Secrets(ns) satisfies it.
type SecretGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Secret, error)
}

// ServiceLister lists the services of one namespace; client-go's
// CoreV1().Services(ns) satisfies it.
type ServiceLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.ServiceList, error)
}

// Config configures a Cache. Every client is optional: asking for a kind
// without one gives an error wrapping ErrNoSource.
type Config struct {
	// ConfigMaps returns the configMap client of a namespace, for example
	// func(ns string) objects.ConfigMapGetter { return cs.CoreV1().ConfigMaps(ns) }.
	ConfigMaps func(namespace string) ConfigMapGetter
	// Secrets returns the secret client of a namespace.
	Secrets func(namespace string) SecretGetter
	// Services returns the service client of a namespace.
	Services func(namespace string) ServiceLister
	// TTL is how long a fetched object is served before it is read again,
	// the kubelet's cache-based configMap and secret managers' TTL.
	// Default 1m.
	TTL time.Duration
	// Watch keeps every configMap and secret read current with a watch on
	// that one object (the kubelet's default Watch strategy) while Run
	// runs, instead of reading it again every TTL. The clients must then
	// also have Watch(ctx, metav1.ListOptions), as client-go's do; others
	// stay on the TTL.
	Watch bool
	// Clock is the time source; watch retries and idle checks use its
	// timers. Default the real clock.
	Clock clock.WithTicker
}

// Cache serves configMaps, secrets and service lists from memory, reading
// each object from the apiserver at most once per TTL however many pods and
// syncs ask for it. Failed reads (NotFound included) are not cached, so a
// pod waiting for an object sees it at its next sync. The objects returned
// are shared: callers must not modify them. Safe for concurrent use.
type Cache struct {
	cfg Config
	mu  sync.Mutex
	m   map[key]*entry
	// pruneAt is the size at which entries unused for a while are dropped.
	pruneAt int
	// runCtx is Run's context while it runs; watches start only then.
	runCtx context.Context
	wg     sync.WaitGroup
}

type kind uint8

const (
	kindConfigMap kind = iota
	kindSecret
	kindServices
)

func (k kind) resource() string {
	switch k {
	case kindConfigMap:
		return "configmaps"
	case kindSecret:
		return "secrets"
	}
	return "services"
}

type key struct {
	kind            kind
	namespace, name string
}

type entry struct {
	mu      sync.Mutex // held while fetching, so one read serves concurrent askers
	obj     any
	fetched time.Time
	// watched is set while a watch keeps obj current; gone when the watch
	// saw the object deleted. Both under mu.
	watched, gone bool
	// client returns the client to watch the object with (nil: none).
	client func() any
	// lastUsed and cancel are under the Cache's mu.
	lastUsed time.Time
	cancel   context.CancelFunc
}

// New returns a Cache for c.
func New(c Config) *Cache {
	if c.TTL <= 0 {
		c.TTL = time.Minute
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return &Cache{cfg: c, m: map[key]*entry{}, pruneAt: 64}
}

// GetConfigMap returns the configMap namespace/name.
func (c *Cache) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	if c.cfg.ConfigMaps == nil {
		return nil, fmt.Errorf("couldn't get configMap %s/%s: %w", namespace, name, ErrNoSource)
	}
	o, err := c.get(ctx, key{kindConfigMap, namespace, name}, func(ctx context.Context) (any, error) {
		return c.cfg.ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	}, func() any { return c.cfg.ConfigMaps(namespace) })
	if err != nil {
		return nil, err
	}
	return o.(*v1.ConfigMap), nil
}

// GetSecret returns the secret namespace/name.
func (c *Cache) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	if c.cfg.Secrets == nil {
		return nil, fmt.Errorf("couldn't get secret %s/%s: %w", namespace, name, ErrNoSource)
	}
	o, err := c.get(ctx, key{kindSecret, namespace, name}, func(ctx context.Context) (any, error) {
		return c.cfg.Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	}, func() any { return c.cfg.Secrets(namespace) })
	if err != nil {
		return nil, err
	}
	return o.(*v1.Secret), nil
}

// ListServices returns the services of namespace. Without a Services client
// it returns none and no error: a node without an apiserver sets no service
// variables. With Config.Watch, while Run runs, a namespace's list is kept
// current by a watch on its services (as the kubelet's service informer), so
// a service created after the first read is in the next one; otherwise the
// list is read again every TTL.
func (c *Cache) ListServices(ctx context.Context, namespace string) ([]*v1.Service, error) {
	if c.cfg.Services == nil {
		return nil, nil
	}
	o, err := c.get(ctx, key{kindServices, namespace, ""}, func(ctx context.Context) (any, error) {
		return listServices(ctx, c.cfg.Services(namespace))
	}, func() any { return c.cfg.Services(namespace) })
	if err != nil {
		return nil, err
	}
	return o.(*serviceList).items, nil
}

// serviceList is a namespace's services as the cache holds them: replaced,
// never modified, when a watch event changes it, since callers share items.
type serviceList struct {
	rv    string // the list's resource version, where its watch starts
	items []*v1.Service
}

func listServices(ctx context.Context, l ServiceLister) (*serviceList, error) {
	got, err := l.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := &serviceList{rv: got.ResourceVersion, items: make([]*v1.Service, len(got.Items))}
	for i := range got.Items {
		out.items[i] = &got.Items[i]
	}
	return out, nil
}

// with returns the list with svc added, or in place of the service of its
// name.
func (l *serviceList) with(svc *v1.Service) *serviceList {
	out := &serviceList{rv: svc.ResourceVersion, items: make([]*v1.Service, 0, len(l.items)+1)}
	for _, s := range l.items {
		if s.Name != svc.Name {
			out.items = append(out.items, s)
		}
	}
	out.items = append(out.items, svc)
	return out
}

// without returns the list without the service named name.
func (l *serviceList) without(name, rv string) *serviceList {
	out := &serviceList{rv: rv, items: make([]*v1.Service, 0, len(l.items))}
	for _, s := range l.items {
		if s.Name != name {
			out.items = append(out.items, s)
		}
	}
	return out
}

// get returns k's object from the cache, fetching it when it is not there,
// or older than the TTL and not watched. client, if not nil, returns the
// client to watch the object with.
func (c *Cache) get(ctx context.Context, k key, fetch func(context.Context) (any, error), client func() any) (any, error) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	e, ok := c.m[k]
	if !ok {
		e = &entry{}
		c.m[k] = e
		c.maybePrune(now)
	}
	e.lastUsed = now
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.watched && e.gone {
		return nil, apierrors.NewNotFound(v1.Resource(k.kind.resource()), k.name)
	}
	if e.obj != nil && (e.watched || now.Sub(e.fetched) < c.cfg.TTL) {
		if client != nil && c.cfg.Watch && !e.watched {
			c.startWatch(k, e, e.obj, client) // Run may have started since the read
		}
		return e.obj, nil
	}
	o, err := fetch(ctx)
	if err != nil {
		return nil, err
	}
	e.obj, e.fetched, e.client = o, c.cfg.Clock.Now(), client
	if client != nil && c.cfg.Watch {
		c.startWatch(k, e, o, client)
	}
	return o, nil
}

// maybePrune drops entries nobody asked for in ten TTLs once the map has
// doubled since the last prune, so objects of deleted pods do not pile up.
// c.mu is held.
func (c *Cache) maybePrune(now time.Time) {
	if len(c.m) < c.pruneAt {
		return
	}
	for k, e := range c.m {
		if now.Sub(e.lastUsed) > 10*c.cfg.TTL {
			if e.cancel != nil {
				e.cancel()
			}
			delete(c.m, k)
		}
	}
	c.pruneAt = max(64, 2*len(c.m))
}
