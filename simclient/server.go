package simclient

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/sim"
)

// Config configures a Server. The zero value serves every built-in kind.
type Config struct {
	// Scheme has the Go types served as typed objects. Default: client-go's
	// scheme (every built-in kind). Add a CRD's types to serve it typed (a
	// controller-runtime project's scheme).
	Scheme *runtime.Scheme
	// Resources are further kinds served as unstructured objects (custom
	// resources without Go types).
	Resources []Resource
	// ClusterScoped names the Scheme's own cluster-scoped kinds beyond the
	// built-in ones (a cluster-scoped CRD's Go type).
	ClusterScoped []schema.GroupVersionKind
	// Seed keys the UIDs and generated names of the objects the Server
	// stores itself (all but pods, Nodes, Leases and core Events, which are
	// sim's Store's and keyed by the cluster's seed).
	Seed uint64
}

// Server serves the Kubernetes REST API of a sim.Cluster from memory: pods,
// Nodes, coordination/v1 Leases and core/v1 Events are the cluster's own
// (its agents see what a client writes), every other kind of the Scheme
// and Config.Resources is kept here. Give clients its RESTConfig.
type Server struct {
	store  *sim.Store
	clock  clock.PassiveClock
	scheme *runtime.Scheme
	seed   uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	gcWake chan struct{}

	mu        sync.Mutex
	resources map[schema.GroupVersionResource]*resource
	byKind    map[schema.GroupVersionKind]*resource
	tables    map[schema.GroupVersionResource]*table
	rv        uint64            // resourceVersions of the Server's own objects
	simRV     uint64            // the newest resourceVersion seen from sim's Store
	created   map[string]uint64 // draws per key (see keyed)
	unobserve func()
}

// New serves cl's API; Close it before cl.
func New(cl *sim.Cluster, c Config) (*Server, error) {
	if cl == nil {
		return nil, fmt.Errorf("simclient: nil cluster")
	}
	scheme := c.Scheme
	if scheme == nil {
		scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			return nil, err
		}
	}
	rs, err := resourcesOf(scheme, c.Resources)
	if err != nil {
		return nil, err
	}
	for _, gvk := range c.ClusterScoped {
		for _, r := range rs {
			if r.gvk == gvk {
				r.namespaced = false
			}
		}
	}
	s := &Server{store: cl.Store(), clock: cl.Clock(), scheme: scheme, seed: c.Seed, resources: rs,
		byKind: map[schema.GroupVersionKind]*resource{}, tables: map[schema.GroupVersionResource]*table{},
		created: map[string]uint64{}, gcWake: make(chan struct{}, 1)}
	for gvr, r := range rs {
		s.tables[gvr] = newTable(r)
		s.byKind[r.gvk] = r
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// The feed runs under the sim Store's lock, then takes s.mu: s.mu is
	// never held while calling the sim Store.
	s.unobserve = s.store.Observe(s.simChanged)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.collectGarbage(s.ctx)
	}()
	return s, nil
}

// Close ends every watch and the garbage collector.
func (s *Server) Close() {
	s.unobserve()
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tables {
		for w := range t.watchers {
			w.stop()
			delete(t.watchers, w)
		}
	}
}

// RESTConfig is a client configuration for the Server: its RoundTrip as
// the transport, JSON, and no client-side rate limit (client-go's token
// bucket waits on real time, which a virtual clock does not advance).
func (s *Server) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:          "http://sim.invalid",
		Transport:     s,
		ContentConfig: rest.ContentConfig{ContentType: runtime.ContentTypeJSON, AcceptContentTypes: runtime.ContentTypeJSON},
		QPS:           -1,
		RateLimiter:   flowcontrol.NewFakeAlwaysRateLimiter(),
		UserAgent:     "simclient",
	}
}

// Clientset is client-go's clientset on the Server.
func (s *Server) Clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(s.RESTConfig())
}

// Dynamic is client-go's dynamic client on the Server.
func (s *Server) Dynamic() (*dynamic.DynamicClient, error) {
	return dynamic.NewForConfig(s.RESTConfig())
}

// simChanged takes a change of sim's Store into its table; the Store's
// lock is held.
func (s *Server) simChanged(c sim.Change) {
	gvr := simGVR(c.Object)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[gvr]
	if t == nil {
		return
	}
	s.simRV = max(s.simRV, rvOf(c.Object))
	t.apply(c.Type, c.Object, c.Old)
	if c.Type == watch.Deleted {
		s.wakeGC()
	}
}

func simGVR(o runtime.Object) schema.GroupVersionResource {
	switch o.(type) {
	case *corev1.Pod:
		return podsGVR
	case *corev1.Node:
		return schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	case *corev1.Event:
		return schema.GroupVersionResource{Version: "v1", Resource: "events"}
	case *coordinationv1.Lease:
		return schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	}
	return schema.GroupVersionResource{}
}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// listRV is the resourceVersion of a list or of a watch-list's end: every
// later change of t has a newer one. s.mu is held.
func (s *Server) listRV(t *table) uint64 {
	if t.res.sim {
		return max(s.simRV, t.lastRV)
	}
	return s.rv
}

// keyed is a random source for the n-th draw under a key, so that
// concurrent writers leave a seeded run's names and UIDs as they were.
// s.mu is held.
func (s *Server) keyed(parts ...string) *rand.Rand {
	k := strings.Join(parts, "\x00")
	n := s.created[k]
	s.created[k] = n + 1
	h := fnv.New64a()
	h.Write([]byte(k))
	return rand.New(rand.NewPCG(s.seed^h.Sum64(), n^0x9e3779b97f4a7c15))
}

func uidFrom(r *rand.Rand) types.UID {
	var b [16]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]))
}

func nameSuffix(r *rand.Rand) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func (s *Server) now() metav1.Time { return metav1.NewTime(s.clock.Now().Truncate(time.Second)) }

// newObject is an empty object of r's kind.
func (s *Server) newObject(r *resource) (runtime.Object, error) {
	if !r.typed {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(r.gvk)
		return u, nil
	}
	return s.scheme.New(r.gvk)
}

// withKind is a copy of o with r's apiVersion and kind, for encoding.
func withKind(o runtime.Object, r *resource) runtime.Object {
	c := o.DeepCopyObject()
	c.GetObjectKind().SetGroupVersionKind(r.gvk)
	return c
}

func notFound(r *resource, name string) error {
	return apierrors.NewNotFound(r.gvr.GroupResource(), name)
}

func conflict(r *resource, name, msg string) error {
	return apierrors.NewConflict(r.gvr.GroupResource(), name, fmt.Errorf("%s", msg))
}
