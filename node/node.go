package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/nodekit/nodekit/internal/runtimestate"
	"github.com/nodekit/nodekit/runtime"
)

// The back-off of failed apiserver calls: the lease controller's, 200ms
// doubling to 7s.
const (
	backoffInitial = 200 * time.Millisecond
	backoffMax     = 7 * time.Second
	// statusRetries is how many times one status update is tried in a
	// row, whatever the error, the kubelet's nodeStatusUpdateRetry.
	statusRetries = 5
	// Until the node is first Ready, and for at most fastStatusFor after
	// registration, the status is computed every fastStatusPeriod so that
	// it turns Ready as soon as it can: the kubelet's fastStatusUpdateOnce.
	fastStatusPeriod = 100 * time.Millisecond
	fastStatusFor    = 2 * time.Minute
)

// Controller keeps one Node and its Lease in the apiserver. Create it with
// New, run it with Run (once).
type Controller struct {
	cfg Config

	labels    map[string]string
	addresses []v1.NodeAddress
	// osLabel and archLabel are the kubernetes.io/os and arch labels'
	// values: the host's, or Config.NodeInfo's.
	osLabel, archLabel string

	trigger    chan struct{}
	registered chan struct{}
	regOnce    sync.Once
	started    atomic.Bool

	// machineMu guards the last machine read and the resources computed
	// from it (machineResources).
	machineMu                sync.Mutex
	lastMachine              *Machine
	machineCap, machineAlloc v1.ResourceList

	// settersMu keeps Setters from running twice at once.
	settersMu sync.Mutex

	mu       sync.Mutex
	node     *v1.Node // last known from the apiserver; never modified
	provided *v1.Node // the provider's last node
	// appliedLabels and appliedAnnotations are the provider's as last
	// written to the Node: a key it drops is removed from the Node.
	appliedLabels, appliedAnnotations map[string]string
	// watching is whether a watch of the Node is open (watch.go): node is
	// then as current as the apiserver's cache.
	watching bool
	// readAt is when node was last read from or written to the apiserver,
	// or when the last watch of it ended.
	readAt time.Time

	// Owned by the status loop.
	lastReport time.Time
	// runtime is the runtime's health as the status loop last heard it.
	runtime runtimestate.State
	// images is the runtime's image list as last read, at imagesAt (zero:
	// never read).
	images   []runtime.Image
	imagesAt time.Time
	// Owned by the lease loop.
	lease *coordinationv1.Lease
}

// New checks c and fills its defaults. Nothing is read or sent until Run
// (or InitialNode).
func New(c Config) (*Controller, error) {
	if err := c.setDefaults(); err != nil {
		return nil, err
	}
	ctl := &Controller{
		cfg:        c,
		trigger:    make(chan struct{}, 1),
		registered: make(chan struct{}),
		osLabel:    goruntime.GOOS,
		archLabel:  goruntime.GOARCH,
	}
	if ni := c.NodeInfo; ni != nil {
		if ni.OperatingSystem != "" {
			ctl.osLabel = ni.OperatingSystem
		}
		if ni.Architecture != "" {
			ctl.archLabel = ni.Architecture
		}
	}
	hostname := c.Hostname
	ctl.labels = map[string]string{
		v1.LabelHostname:   hostname,
		v1.LabelOSStable:   ctl.osLabel,
		v1.LabelArchStable: ctl.archLabel,
		labelOSBeta:        ctl.osLabel,
		labelArchBeta:      ctl.archLabel,
	}
	maps.Copy(ctl.labels, c.Labels)
	ctl.runtime.DownAfter = c.RuntimeDownAfter
	if c.Virtual && len(c.Addresses) == 0 && len(c.NodeIPs) == 0 {
		ctl.addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: hostname}}
	} else {
		ctl.addresses = nodeAddresses(c.Addresses, c.NodeIPs, hostname)
	}
	return ctl, nil
}

// Run registers the Node (creating it, or reconciling the one there),
// then keeps its status and Lease until ctx ends. If Config.Nodes is a
// NodeWatcher, the Node is watched meanwhile, as the kubelet's node
// informer watches it, so that SharedNode, Node and Get return it as
// others change it (labels, taints, extended resources) within moments;
// otherwise they return it as last read or written, and each status
// computation (every UpdateFrequency) reads it first from the apiserver's
// cache, as the kubelet's status update does. A status update is tried up
// to five times in a row, whatever fails, as the kubelet's; registration
// and the Lease are retried with back-off. Run returns early only when the
// apiserver refuses the Node for good (invalid, forbidden, unauthorized),
// with an error that carries the apiserver's reason. It returns after its
// goroutines have ended.
func (c *Controller) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("node: Run called twice")
	}
	if p := c.cfg.Provider; p != nil {
		p.NotifyNodeStatus(ctx, c.providerUpdate)
	}
	if err := c.register(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	var wg sync.WaitGroup
	// The lease and watch loops end with the status loop, which ends early
	// when the apiserver refuses the status for good.
	loopsCtx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	if c.cfg.Leases != nil {
		wg.Go(func() { c.leaseLoop(loopsCtx) })
	}
	if w, ok := c.cfg.Nodes.(NodeWatcher); ok {
		wg.Go(func() { c.watchLoop(loopsCtx, w) })
	}
	err := c.statusLoop(ctx)
	stopLoops()
	wg.Wait()
	return err
}

// Trigger asks for a status computation now rather than at the next tick,
// for a caller that saw readiness change.
func (c *Controller) Trigger() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// Registered is closed once the Node is registered.
func (c *Controller) Registered() <-chan struct{} { return c.registered }

// Node returns a copy of the Node as the apiserver last returned it (to a
// call or over the watch), or nil before registration and after the Node
// was deleted, until it is registered again. The caller owns the copy and
// may modify it; SharedNode is the read-only one without the copy.
func (c *Controller) Node() *v1.Node {
	if n := c.current(); n != nil {
		return n.DeepCopy()
	}
	return nil
}

// SharedNode returns the Node as Node does, without the copy: it is the
// Controller's own, and the caller must not modify it (the Shared prefix
// means so throughout nodekit).
// Admission checks pods against it, and against InitialNode while it is
// nil (admission.GeneralPredicatesOrInitial), as the kubelet checks them
// against its node informer's Node, or its initial node while the
// informer has none.
func (c *Controller) SharedNode() *v1.Node { return c.current() }

// Get returns the registered Node without asking the apiserver, so that a
// Controller can stand in for a Nodes client of status.Manager (mirror
// pods' owner references). Before registration it fails.
func (c *Controller) Get(_ context.Context, name string, _ metav1.GetOptions) (*v1.Node, error) {
	if name != c.cfg.NodeName {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	n := c.current()
	if n == nil {
		return nil, fmt.Errorf("node %q is not registered yet", name)
	}
	return n.DeepCopy(), nil
}

func (c *Controller) current() *v1.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node
}

// ready reports whether the last known Node is Ready.
func (c *Controller) ready() bool {
	n := c.current()
	if n == nil {
		return false
	}
	rc := findCondition(n.Status.Conditions, v1.NodeReady)
	return rc != nil && rc.Status == v1.ConditionTrue
}

// setNode keeps n, a Node read from or written to the apiserver now,
// unless the controller holds a later one (from the watch), and returns
// the one it holds.
func (c *Controller) setNode(n *v1.Node) *v1.Node {
	held := c.observe(n)
	c.mu.Lock()
	c.readAt = c.cfg.Clock.Now()
	c.mu.Unlock()
	c.regOnce.Do(func() { close(c.registered) })
	return held
}

// observe keeps n unless the controller holds a later Node, and returns
// the one it holds. A Node the apiserver returned late (an event of a
// watch that has yet to deliver the update the status loop made, a read
// from a cache that lags) must not replace a later one.
func (c *Controller) observe(n *v1.Node) *v1.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.node == nil || laterThan(n.ResourceVersion, c.node.ResourceVersion) {
		c.node = n
	}
	return c.node
}

// observeGone forgets the Node, deleted at resource version rv, unless
// the controller holds a later one (registered again since).
func (c *Controller) observeGone(rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.node == nil || laterThan(c.node.ResourceVersion, rv) {
		return
	}
	c.node = nil
	c.cfg.Log.Info("Node was deleted", "node", c.cfg.NodeName)
}

// forget forgets the Node, which the apiserver no longer has.
func (c *Controller) forget() {
	c.mu.Lock()
	c.node = nil
	c.mu.Unlock()
}

// laterThan reports whether resource version a is later than b; versions
// that do not compare (not the apiserver's integers) count as later, so
// that the last one heard wins, as in an informer.
func laterThan(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err != nil || cmp > 0
}

// fresh reports whether the Node held is as current as a read from the
// apiserver's cache would make it: a watch of it is open, or it was read
// or written within the last UpdateFrequency.
func (c *Controller) fresh() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watching || c.cfg.Clock.Since(c.readAt) < c.cfg.UpdateFrequency
}

// providedMeta returns the labels and annotations of the provider's last
// node (nil without one); they are the controller's own, not to be
// modified.
func (c *Controller) providedMeta() (labels, annotations map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.provided == nil {
		return nil, nil
	}
	return c.provided.Labels, c.provided.Annotations
}

// setApplied records the provider's labels and annotations as written.
func (c *Controller) setApplied(labels, annotations map[string]string) {
	c.mu.Lock()
	c.appliedLabels, c.appliedAnnotations = labels, annotations
	c.mu.Unlock()
}

// mergeProvided returns cur with want (the provider's labels or
// annotations) set and the keys of applied (the provider's as last
// written) that want dropped removed, unless someone changed their value
// since; keys of owned (Config's and the kubelet's) are the controller's
// and left alone. It returns cur itself when nothing changes, else a new
// map, and whether it changed.
func mergeProvided(cur, want, applied, owned map[string]string) (map[string]string, bool) {
	var out map[string]string
	write := func() {
		if out == nil {
			out = maps.Clone(cur)
			if out == nil {
				out = map[string]string{}
			}
		}
	}
	for k, v := range want {
		if _, mine := owned[k]; mine {
			continue
		}
		if cv, ok := cur[k]; !ok || cv != v {
			write()
			out[k] = v
		}
	}
	for k, v := range applied {
		if _, still := want[k]; still {
			continue
		}
		if _, mine := owned[k]; mine {
			continue
		}
		if cv, ok := cur[k]; ok && cv == v {
			write()
			delete(out, k)
		}
	}
	if out == nil {
		return cur, false
	}
	return out, true
}

func (c *Controller) providerUpdate(n *v1.Node) {
	cp := n.DeepCopy()
	c.mu.Lock()
	c.provided = cp
	c.mu.Unlock()
	c.Trigger()
}

// callCtx bounds one apiserver call.
func (c *Controller) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.RequestTimeout)
}

// permanent reports whether retrying err cannot help without someone
// changing the Node, the cluster's policy or the credentials.
func permanent(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}

// sleep waits d on the injected clock; false if ctx ended first.
func (c *Controller) sleep(ctx context.Context, d time.Duration) bool {
	t := c.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// nextBackoff doubles d within [initial, limit].
func nextBackoff(d, initial, limit time.Duration) time.Duration {
	return min(max(2*d, initial), limit)
}

// register creates or reconciles the Node, retrying with back-off until it
// succeeds, ctx ends (nil) or the apiserver refuses for good.
func (c *Controller) register(ctx context.Context) error {
	var wait time.Duration
	for {
		err := c.tryRegister(ctx)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		if permanent(err) {
			return fmt.Errorf("node: registering Node %q: %w", c.cfg.NodeName, err)
		}
		wait = nextBackoff(wait, backoffInitial, backoffMax)
		c.cfg.Log.Error(err, "Unable to register node, will retry", "node", c.cfg.NodeName, "in", wait)
		if !c.sleep(ctx, wait) {
			return nil
		}
	}
}

// initialNode is the Node to create: labels, taints and a full status.
func (c *Controller) initialNode(ctx context.Context) *v1.Node {
	n := c.newNode()
	n.Status = *c.computeStatus(ctx, &n.Status, c.cfg.Clock.Now())
	return n
}

// newNode is the Node to create without a status: name, labels and
// annotations (Config's and the provider's), taints and providerID
// (Config's, else the provider's node's, as virtual-kubelet registers its
// provider's node spec).
func (c *Controller) newNode() *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: c.cfg.NodeName, Labels: maps.Clone(c.labels), Annotations: maps.Clone(c.cfg.Annotations)},
		Spec:       v1.NodeSpec{Taints: append([]v1.Taint(nil), c.cfg.Taints...), ProviderID: c.cfg.ProviderID},
	}
	c.mu.Lock()
	provided := c.provided
	c.mu.Unlock()
	if provided == nil {
		return n
	}
	n.Labels, _ = mergeProvided(n.Labels, provided.Labels, nil, c.labels)
	n.Annotations, _ = mergeProvided(n.Annotations, provided.Annotations, nil, c.cfg.Annotations)
	if n.Spec.ProviderID == "" {
		n.Spec.ProviderID = provided.Spec.ProviderID
	}
	for _, t := range provided.Spec.Taints {
		if !slices.ContainsFunc(n.Spec.Taints, func(o v1.Taint) bool { return o.MatchTaint(&t) }) {
			n.Spec.Taints = append(n.Spec.Taints, t)
		}
	}
	return n
}

// InitialNode returns the Node the controller registers, as far as it is
// known without asking the runtime or the apiserver: its name, labels (the
// kubelet's and Config.Labels), taints (Config.Taints), capacity and
// allocatable (the host's and Config's, the provider's last, then the
// Setters), addresses, daemon endpoint and nodeInfo; no conditions, images
// or runtime version. It is the kubelet's initialNode, which the kubelet
// admits pods against until its Node is registered (getNodeAnyWay):
// admission.GeneralPredicatesOrInitial takes it for that. Each call
// builds it afresh, running the Setters (never at the same time as the
// status loop's run); the Node is read only, its maps may be shared with
// the controller's.
func (c *Controller) InitialNode(ctx context.Context) *v1.Node {
	n := c.newNode()
	c.setMachineStatus(ctx, &n.Status, &v1.NodeStatus{})
	c.runSetters(ctx, &n.Status)
	return n
}

func (c *Controller) tryRegister(ctx context.Context) error {
	node := c.initialNode(ctx)
	pl, pa := c.providedMeta()
	cctx, cancel := c.callCtx(ctx)
	created, err := c.cfg.Nodes.Create(cctx, node, metav1.CreateOptions{})
	cancel()
	if err == nil {
		c.cfg.Log.Info("Registered node", "node", c.cfg.NodeName)
		c.lastReport = c.cfg.Clock.Now()
		c.setApplied(pl, pa)
		c.setNode(created)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	cctx, cancel = c.callCtx(ctx)
	existing, err := c.cfg.Nodes.Get(cctx, c.cfg.NodeName, metav1.GetOptions{})
	cancel()
	if err != nil {
		return fmt.Errorf("reading the existing node: %w", err)
	}
	if updated, ok := c.reconcile(existing); ok {
		cctx, cancel = c.callCtx(ctx)
		existing, err = c.cfg.Nodes.Update(cctx, updated, metav1.UpdateOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("reconciling the existing node: %w", err)
		}
	}
	c.cfg.Log.Info("Node was registered before; reconciled", "node", c.cfg.NodeName)
	// Its status is someone else's or stale: the first computation sends.
	c.lastReport = time.Time{}
	c.setNode(existing)
	return nil
}

// reconcile returns a copy of existing with the labels and annotations
// the controller owns (the kubelet's default labels, Config.Labels and
// Config.Annotations) set, and Config.ProviderID if the Node has none, and
// whether that changed anything. Other labels, annotations, taints and the
// spec are left alone, as the kubelet leaves them; the status, and the
// provider's labels and annotations, follow with the first update.
func (c *Controller) reconcile(existing *v1.Node) (*v1.Node, bool) {
	changed := false
	n := existing.DeepCopy()
	set := func(m *map[string]string, owned map[string]string) {
		for k, v := range owned {
			if cur, ok := (*m)[k]; !ok || cur != v {
				if *m == nil {
					*m = map[string]string{}
				}
				(*m)[k] = v
				changed = true
			}
		}
	}
	set(&n.Labels, c.labels)
	set(&n.Annotations, c.cfg.Annotations)
	if n.Spec.ProviderID == "" && c.cfg.ProviderID != "" {
		n.Spec.ProviderID = c.cfg.ProviderID
		changed = true
	}
	return n, changed
}

// statusLoop computes the status every UpdateFrequency (and on Trigger),
// sending it when it changed or ReportFrequency passed; an update that
// failed all its tries waits for the next computation, as the kubelet's.
func (c *Controller) statusLoop(ctx context.Context) error {
	// The first computation at once: a reconciled Node's status is stale.
	t := c.cfg.Clock.NewTimer(0)
	defer t.Stop()
	fastUntil := c.cfg.Clock.Now().Add(fastStatusFor)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		case <-c.trigger:
			t.Stop()
		}
		next := c.cfg.UpdateFrequency
		if !fastUntil.IsZero() {
			if c.ready() || !c.cfg.Clock.Now().Before(fastUntil) {
				fastUntil = time.Time{}
			} else {
				next = min(next, fastStatusPeriod)
			}
		}
		if err := c.syncStatus(ctx); err != nil && ctx.Err() == nil {
			if permanent(err) {
				return fmt.Errorf("node: updating Node %q: %w", c.cfg.NodeName, err)
			}
			c.cfg.Log.Error(err, "Unable to update node status, will retry", "node", c.cfg.NodeName, "in", next)
		}
		t.Reset(next)
	}
}

// The beta OS and architecture labels the kubelet still sets at
// registration (its kubeletapis.LabelOS and LabelArch).
const (
	labelOSBeta   = "beta.kubernetes.io/os"
	labelArchBeta = "beta.kubernetes.io/arch"
)

// requiredLabelsMissing reports whether labels lack the stable OS or
// architecture label with the node's value, which the kubelet restores
// at every status update.
func (c *Controller) requiredLabelsMissing(labels map[string]string) bool {
	return labels[v1.LabelOSStable] != c.osLabel || labels[v1.LabelArchStable] != c.archLabel
}

// errNodeGone says the Node was deleted under the controller.
var errNodeGone = errors.New("node deleted")

// syncStatus computes the status and sends it if it changed or is due, as
// the kubelet's updateNodeStatus: up to statusRetries tries in a row,
// whatever failed (a read, a conflict, a 500, a timeout), calling
// OnRepeatedHeartbeatFailure from the second failure on. It returns the
// last try's error. A Node deleted under the controller is registered
// again.
func (c *Controller) syncStatus(ctx context.Context) error {
	err := c.syncStatusTries(ctx)
	if err == nil || ctx.Err() != nil || c.cfg.OnStatusUpdateError == nil {
		return err
	}
	// virtual-kubelet's NodeStatusUpdateErrorHandler: nil from it is
	// another try, from the Node read again.
	if herr := c.cfg.OnStatusUpdateError(ctx, err); herr != nil {
		return herr
	}
	if err = c.tryUpdateStatus(ctx, 1); errors.Is(err, errNodeGone) {
		c.forget()
		return fmt.Errorf("node %q not found: it was deleted", c.cfg.NodeName)
	}
	return err
}

// syncStatusTries is syncStatus without the error handler.
func (c *Controller) syncStatusTries(ctx context.Context) error {
	if c.current() == nil && c.cfg.RegisterAgain { // deleted earlier and not registered again yet
		return c.tryRegister(ctx)
	}
	var err error
	for try := range statusRetries {
		err = c.tryUpdateStatus(ctx, try)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errNodeGone) {
			c.forget()
			if !c.cfg.RegisterAgain {
				// As the kubelet: a deleted Node stays deleted until the
				// agent restarts, or someone creates it again.
				return fmt.Errorf("node %q not found: it was deleted", c.cfg.NodeName)
			}
			c.cfg.Log.Info("Node was deleted; registering it again", "node", c.cfg.NodeName)
			return c.tryRegister(ctx)
		}
		if try > 0 && c.cfg.OnRepeatedHeartbeatFailure != nil {
			c.cfg.OnRepeatedHeartbeatFailure()
		}
		c.cfg.Log.V(2).Info("Error updating node status, will retry", "node", c.cfg.NodeName, "try", try+1, "err", err)
	}
	return err
}

// tryUpdateStatus is one try of syncStatus, the kubelet's
// tryUpdateNodeStatus: the status is computed from the Node as the
// apiserver has it and, if it changed or is due, sent as a patch (with a
// NodePatcher, as the kubelet's) or with UpdateStatus.
// The first try takes the Node held if it is fresh (watched, or read
// within UpdateFrequency) and otherwise reads it from the apiserver's
// cache (resourceVersion "0"); later tries read it from storage.
func (c *Controller) tryUpdateStatus(ctx context.Context, try int) error {
	base := c.current()
	if base == nil && c.cfg.RegisterAgain {
		return errNodeGone // the watch saw it deleted
	}
	if base == nil || try > 0 || !c.fresh() {
		opts := metav1.GetOptions{}
		if try == 0 {
			opts.ResourceVersion = "0"
		}
		cctx, cancel := c.callCtx(ctx)
		n, err := c.cfg.Nodes.Get(cctx, c.cfg.NodeName, opts)
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			return errNodeGone
		case err != nil:
			return fmt.Errorf("reading node %q: %w", c.cfg.NodeName, err)
		case n == nil:
			return fmt.Errorf("reading node %q: no node returned", c.cfg.NodeName)
		}
		base = c.setNode(n)
	}
	now := c.cfg.Clock.Now()
	st := c.computeStatus(ctx, &base.Status, now)
	labelsMissing := c.requiredLabelsMissing(base.Labels)
	// The provider's labels and annotations (NotifyNodeStatus), as
	// virtual-kubelet applies its provider's node's.
	pl, pa := c.providedMeta()
	c.mu.Lock()
	al, aa := c.appliedLabels, c.appliedAnnotations
	c.mu.Unlock()
	labels, labelsChanged := mergeProvided(base.Labels, pl, al, c.labels)
	annotations, annotationsChanged := mergeProvided(base.Annotations, pa, aa, c.cfg.Annotations)
	if !labelsMissing && !labelsChanged && !annotationsChanged &&
		!statusChanged(&base.Status, st) && now.Sub(c.lastReport) < c.cfg.ReportFrequency {
		return nil
	}
	// One copy of base's meta and spec with the new status, rather than
	// a copy of base whose status is then replaced.
	n := (&v1.Node{TypeMeta: base.TypeMeta, ObjectMeta: base.ObjectMeta, Spec: base.Spec, Status: *st}).DeepCopy()
	if labelsChanged {
		n.Labels = labels // mergeProvided's own copy
	}
	if annotationsChanged {
		n.Annotations = annotations
	}
	if labelsMissing {
		// The kubelet's updateNode puts back the OS and architecture labels
		// (the status subresource takes metadata changes).
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[v1.LabelOSStable], n.Labels[v1.LabelArchStable] = c.osLabel, c.archLabel
	}
	cctx, cancel := c.callCtx(ctx)
	var updated *v1.Node
	var err error
	if p, ok := c.cfg.Nodes.(NodePatcher); ok {
		updated, err = c.patchStatus(cctx, p, base, n)
	} else {
		updated, err = c.cfg.Nodes.UpdateStatus(cctx, n, metav1.UpdateOptions{})
	}
	cancel()
	switch {
	case apierrors.IsNotFound(err):
		return errNodeGone
	case err != nil:
		return err
	case updated == nil:
		return errors.New("status update returned no node")
	}
	c.lastReport = now
	c.setApplied(pl, pa)
	c.setNode(updated)
	c.cfg.Log.V(4).Info("Updated node status", "node", c.cfg.NodeName)
	return nil
}
