package nodetest

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Verbs of recorded actions. UpdateStatus is recorded as VerbUpdate with
// Subresource "status".
const (
	VerbGet    = "get"
	VerbCreate = "create"
	VerbUpdate = "update"
	VerbList   = "list"
	VerbWatch  = "watch"
)

// Action is one recorded call.
type Action struct {
	Verb string
	// Resource is "nodes" or "leases".
	Resource string
	Name     string
	// Subresource is "status" for UpdateStatus.
	Subresource string
	// Object is a copy of what Create or Update was given (*v1.Node or
	// *coordinationv1.Lease).
	Object any
	// ResourceVersion is the resourceVersion a Get, List or Watch asked
	// for ("0": any, as from the apiserver's cache; "": the latest).
	ResourceVersion string
	// FieldSelector is a List's or Watch's field selector.
	FieldSelector string
	// Patch is what a Patch was given.
	Patch []byte
	// Err is what the call returned.
	Err error
}

// Fake is an in-memory store of Nodes and Leases answering the calls of
// client-go's typed clients. Stored objects get a UID on create and a new
// ResourceVersion on every write; an update whose ResourceVersion is set and
// stale fails with a Conflict, one of a missing object with NotFound, as
// the apiserver's. It does not validate objects, run admission, or keep
// status apart from spec on Update: e2e runs against a real apiserver for
// that. Safe for concurrent use. The zero value is not usable; call New.
type Fake struct {
	mu      sync.Mutex
	objs    map[string]map[string]any // resource -> name -> object
	actions []Action
	errs    map[string][]error // resource/verb -> queued errors
	hook    func(ctx context.Context, a Action) error
	nextUID int
	nextRV  int
	changed chan struct{}

	// Watches of Nodes and the Node events they replay from (watch.go).
	watchers map[*nodeWatch]struct{}
	history  []nodeEvent
	histFrom int
}

// New returns an empty Fake.
func New() *Fake {
	return &Fake{
		objs:     map[string]map[string]any{"nodes": {}, "leases": {}},
		errs:     map[string][]error{},
		changed:  make(chan struct{}),
		watchers: map[*nodeWatch]struct{}{},
	}
}

// Nodes returns the Fake's Nodes client; its methods have the signatures of
// client-go's CoreV1().Nodes().
func (f *Fake) Nodes() *NodeClient { return &NodeClient{f: f} }

// Leases returns the Fake's Leases client (one namespace); its methods have
// the signatures of client-go's CoordinationV1().Leases(namespace).
func (f *Fake) Leases() *LeaseClient { return &LeaseClient{f: f} }

// InjectError makes the next call of verb on resource ("nodes" or
// "leases") fail with err before it touches the store; several are returned
// in order. Use apierrors (NewInternalError, NewConflict, NewTimeoutError,
// NewForbidden ...) for the apiserver's answers.
func (f *Fake) InjectError(resource, verb string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[resource+"/"+verb] = append(f.errs[resource+"/"+verb], err)
}

// SetHook installs fn, called (without the Fake's lock) before every call;
// a non-nil error fails the call. A hook that blocks until ctx ends plays a
// hanging apiserver. nil removes it.
func (f *Fake) SetHook(fn func(ctx context.Context, a Action) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = fn
}

// Actions returns a copy of the calls so far.
func (f *Fake) Actions() []Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Action(nil), f.actions...)
}

// ClearActions forgets the recorded calls.
func (f *Fake) ClearActions() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = nil
}

// Count returns how many calls of verb on resource (and subresource, ""
// for the object itself) were recorded.
func (f *Fake) Count(resource, verb, subresource string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, a := range f.actions {
		if a.Resource == resource && a.Verb == verb && a.Subresource == subresource {
			n++
		}
	}
	return n
}

// WaitFor blocks until cond, called with the recorded actions under the
// Fake's lock, returns true, or ctx ends.
func (f *Fake) WaitFor(ctx context.Context, cond func([]Action) bool) error {
	for {
		f.mu.Lock()
		ok, ch, n := cond(f.actions), f.changed, len(f.actions)
		f.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("nodetest: condition not met after %d actions: %w", n, ctx.Err())
		}
	}
}

// Node returns a copy of the stored Node.
func (f *Fake) Node(name string) (*v1.Node, bool) {
	o, ok := f.object("nodes", name)
	if !ok {
		return nil, false
	}
	return o.(*v1.Node).DeepCopy(), true
}

// Lease returns a copy of the stored Lease.
func (f *Fake) Lease(name string) (*coordinationv1.Lease, bool) {
	o, ok := f.object("leases", name)
	if !ok {
		return nil, false
	}
	return o.(*coordinationv1.Lease).DeepCopy(), true
}

// PutNode stores a copy of n as another writer would (new
// ResourceVersion, a UID if it has none), without recording an action.
func (f *Fake) PutNode(n *v1.Node) { f.put("nodes", n.DeepCopy()) }

// PutLease is PutNode for a Lease.
func (f *Fake) PutLease(l *coordinationv1.Lease) { f.put("leases", l.DeepCopy()) }

// Delete removes an object ("nodes" or "leases") without recording an
// action, as another client's delete would; a Node's watches get a
// Deleted event.
func (f *Fake) Delete(resource, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objs[resource][name]
	if !ok {
		return
	}
	delete(f.objs[resource], name)
	o = deepCopy(o)
	f.nextRV++
	meta(o).ResourceVersion = strconv.Itoa(f.nextRV)
	f.notifyLocked(resource, watch.Deleted, o)
}

func (f *Fake) object(resource, name string) (any, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objs[resource][name]
	return o, ok
}

func (f *Fake) put(resource string, o any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := meta(o)
	if m.UID == "" {
		f.nextUID++
		m.UID = types.UID("fake-uid-" + strconv.Itoa(f.nextUID))
	}
	f.nextRV++
	m.ResourceVersion = strconv.Itoa(f.nextRV)
	_, existed := f.objs[resource][m.Name]
	f.objs[resource][m.Name] = o
	typ := watch.Added
	if existed {
		typ = watch.Modified
	}
	f.notifyLocked(resource, typ, o)
}

func meta(o any) *metav1.ObjectMeta {
	switch o := o.(type) {
	case *v1.Node:
		return &o.ObjectMeta
	case *coordinationv1.Lease:
		return &o.ObjectMeta
	}
	panic(fmt.Sprintf("nodetest: unexpected %T", o))
}

func deepCopy(o any) any {
	switch o := o.(type) {
	case *v1.Node:
		return o.DeepCopy()
	case *coordinationv1.Lease:
		return o.DeepCopy()
	case *v1.NodeList:
		return o.DeepCopy()
	case *nodeWatch:
		return o
	}
	panic(fmt.Sprintf("nodetest: unexpected %T", o))
}

var groupResources = map[string]schema.GroupResource{
	"nodes":  {Resource: "nodes"},
	"leases": {Group: "coordination.k8s.io", Resource: "leases"},
}

// do runs one call: hook, injected error, then op on the store under the
// lock; it records the action and returns a copy of the result.
func (f *Fake) do(ctx context.Context, a Action, op func() (any, error)) (any, error) {
	if a.Object != nil {
		a.Object = deepCopy(a.Object)
	}
	f.mu.Lock()
	hook := f.hook
	f.mu.Unlock()
	var err error
	if hook != nil {
		err = hook(ctx, a)
	}
	if err == nil {
		err = ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := a.Resource + "/" + a.Verb
	if err == nil && len(f.errs[key]) > 0 {
		err, f.errs[key] = f.errs[key][0], f.errs[key][1:]
	}
	var out any
	if err == nil {
		out, err = op()
	}
	a.Err = err
	f.actions = append(f.actions, a)
	close(f.changed)
	f.changed = make(chan struct{})
	if err != nil {
		return nil, err
	}
	return deepCopy(out), nil
}

func (f *Fake) getLocked(resource, name string) (any, error) {
	o, ok := f.objs[resource][name]
	if !ok {
		return nil, apierrors.NewNotFound(groupResources[resource], name)
	}
	return o, nil
}

func (f *Fake) createLocked(resource string, o any) (any, error) {
	m := meta(o)
	if m.Name == "" {
		return nil, apierrors.NewBadRequest("name is required")
	}
	if _, ok := f.objs[resource][m.Name]; ok {
		return nil, apierrors.NewAlreadyExists(groupResources[resource], m.Name)
	}
	if m.ResourceVersion != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	o = deepCopy(o)
	m = meta(o)
	f.nextUID++
	m.UID = types.UID("fake-uid-" + strconv.Itoa(f.nextUID))
	m.CreationTimestamp = metav1.Now()
	f.nextRV++
	m.ResourceVersion = strconv.Itoa(f.nextRV)
	f.objs[resource][m.Name] = o
	f.notifyLocked(resource, watch.Added, o)
	return o, nil
}

// updateLocked replaces the stored object; with status, only the Node's
// status (the status subresource).
func (f *Fake) updateLocked(resource string, o any, status bool) (any, error) {
	m := meta(o)
	old, ok := f.objs[resource][m.Name]
	if !ok {
		return nil, apierrors.NewNotFound(groupResources[resource], m.Name)
	}
	om := meta(old)
	if m.ResourceVersion != "" && m.ResourceVersion != om.ResourceVersion {
		return nil, apierrors.NewConflict(groupResources[resource], m.Name,
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if m.UID != "" && m.UID != om.UID {
		return nil, apierrors.NewConflict(groupResources[resource], m.Name, fmt.Errorf("UID mismatch"))
	}
	nu := deepCopy(o)
	nm := meta(nu)
	nm.UID, nm.CreationTimestamp = om.UID, om.CreationTimestamp
	if n, ok := nu.(*v1.Node); ok {
		if status { // the apiserver's node status strategy: the spec stays
			n.Spec = *old.(*v1.Node).Spec.DeepCopy()
		} else { // Update leaves the status as it was
			n.Status = *old.(*v1.Node).Status.DeepCopy()
		}
	}
	f.nextRV++
	meta(nu).ResourceVersion = strconv.Itoa(f.nextRV)
	f.objs[resource][m.Name] = nu
	f.notifyLocked(resource, watch.Modified, nu)
	return nu, nil
}

// NodeClient is the Fake's Nodes.
type NodeClient struct{ f *Fake }

// Get returns a copy of the named Node or a NotFound error. Whatever
// opts.ResourceVersion says, the Node is the latest.
func (c *NodeClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error) {
	o, err := c.f.do(ctx, Action{Verb: VerbGet, Resource: "nodes", Name: name, ResourceVersion: opts.ResourceVersion}, func() (any, error) {
		return c.f.getLocked("nodes", name)
	})
	if err != nil {
		return nil, err
	}
	return o.(*v1.Node), nil
}

// Create stores a copy of node (status included, as the apiserver keeps a
// Node's status on create) or fails with AlreadyExists.
func (c *NodeClient) Create(ctx context.Context, node *v1.Node, _ metav1.CreateOptions) (*v1.Node, error) {
	o, err := c.f.do(ctx, Action{Verb: VerbCreate, Resource: "nodes", Name: node.Name, Object: node}, func() (any, error) {
		return c.f.createLocked("nodes", node)
	})
	if err != nil {
		return nil, err
	}
	return o.(*v1.Node), nil
}

// Update replaces the Node's metadata and spec, keeping its status.
func (c *NodeClient) Update(ctx context.Context, node *v1.Node, _ metav1.UpdateOptions) (*v1.Node, error) {
	o, err := c.f.do(ctx, Action{Verb: VerbUpdate, Resource: "nodes", Name: node.Name, Object: node}, func() (any, error) {
		return c.f.updateLocked("nodes", node, false)
	})
	if err != nil {
		return nil, err
	}
	return o.(*v1.Node), nil
}

// UpdateStatus replaces the Node's status and metadata, keeping its spec,
// as the apiserver's node status strategy does (the kubelet relies on it
// to put back its labels).
func (c *NodeClient) UpdateStatus(ctx context.Context, node *v1.Node, _ metav1.UpdateOptions) (*v1.Node, error) {
	o, err := c.f.do(ctx, Action{Verb: VerbUpdate, Resource: "nodes", Subresource: "status", Name: node.Name, Object: node}, func() (any, error) {
		return c.f.updateLocked("nodes", node, true)
	})
	if err != nil {
		return nil, err
	}
	return o.(*v1.Node), nil
}

// LeaseClient is the Fake's Leases.
type LeaseClient struct{ f *Fake }

// Get returns a copy of the named Lease or a NotFound error.
func (c *LeaseClient) Get(ctx context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	o, err := c.f.do(ctx, Action{Verb: VerbGet, Resource: "leases", Name: name}, func() (any, error) {
		return c.f.getLocked("leases", name)
	})
	if err != nil {
		return nil, err
	}
	return o.(*coordinationv1.Lease), nil
}

// Create stores a copy of lease or fails with AlreadyExists.
func (c *LeaseClient) Create(ctx context.Context, lease *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	o, err := c.f.do(ctx, Action{Verb: VerbCreate, Resource: "leases", Name: lease.Name, Object: lease}, func() (any, error) {
		return c.f.createLocked("leases", lease)
	})
	if err != nil {
		return nil, err
	}
	return o.(*coordinationv1.Lease), nil
}

// Update replaces the Lease.
func (c *LeaseClient) Update(ctx context.Context, lease *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	o, err := c.f.do(ctx, Action{Verb: VerbUpdate, Resource: "leases", Name: lease.Name, Object: lease}, func() (any, error) {
		return c.f.updateLocked("leases", lease, false)
	})
	if err != nil {
		return nil, err
	}
	return o.(*coordinationv1.Lease), nil
}
