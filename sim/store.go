package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podutil"
)

var (
	podsResource   = schema.GroupResource{Resource: "pods"}
	nodesResource  = schema.GroupResource{Resource: "nodes"}
	leasesResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
)

// historySize is how many pod events a watch can resume from; an older
// resourceVersion gets 410 Gone and the client relists, as with etcd's
// compaction.
const historySize = 4096

type key struct{ namespace, name string }

// Store is the in-memory API of a Cluster: pods, Nodes, Leases and Events
// with the apiserver's bookkeeping (UIDs, resourceVersions,
// creationTimestamps, generation, graceful deletion, status subresources)
// and pod watches. Its clients have the method sets of client-go's typed
// clients, so nodekit's parts and a controller under test use it as they
// would an apiserver. Safe for concurrent use.
type Store struct {
	clock clock.PassiveClock

	mu sync.Mutex
	rv uint64
	// seed keys pods' UIDs and generated names (see podUID, genName);
	// created counts the pods created under each key and generateName
	// prefix, so the n-th pod of a name has the same UID whatever other
	// pods were created in between or in which order.
	seed     uint64
	created  map[string]uint64
	pods     map[key]*v1.Pod
	nodes    map[string]*v1.Node
	leases   map[key]*coordinationv1.Lease
	history  []histEvent // ring of the last pod events
	histPos  int
	histFrom uint64 // a watch from an older resourceVersion may miss events
	// watchers of one node's pods (a spec.nodeName field selector, as the
	// agents' sources) by node, so an event costs O(1) per node, and all
	// others.
	nodeWatchers map[string]map[*podWatch]struct{}
	watchers     map[*podWatch]struct{}
	// onPod is told of every pod change (old or new nil on create/delete),
	// under mu: the cluster's event log and scheduler.
	onPod  func(old, new *v1.Pod)
	onNode func(old, new *v1.Node)
	// observers see every write (Observe).
	observers map[*observer]struct{}
	// podCIDRs are the nodes' spec.podCIDR, set on a Node as it
	// registers, as the node IPAM controller does. Under cidrMu, taken
	// after mu: AddNode sets them holding the Cluster's lock.
	cidrMu   sync.Mutex
	podCIDRs map[string]string
	// bind, if set, is the scheduler: it names a node for an unbound pod
	// or returns "".
	bind func(*v1.Pod) string
	// deferBind leaves new pods unbound until bindPending (the Cluster
	// calls it once idle), so that the pods created in one instant are
	// placed in name order, whichever goroutine created them first.
	deferBind bool

	// Events, the key of each by what makes it the same event, and the
	// random source of their UIDs (see recordLocked).
	events    map[key]*v1.Event
	eventKeys map[string]key
	eventRng  *rand.Rand
	// nodeRng draws the UIDs of Nodes and Leases, which agents create
	// concurrently with a test's pods: a pod's UID depends on the pods
	// created before it only, and the kubelet's messages show it.
	nodeRng *rand.Rand
}

func newStore(clk clock.PassiveClock, seed uint64) *Store {
	return &Store{
		clock:        clk,
		seed:         seed,
		created:      map[string]uint64{},
		observers:    map[*observer]struct{}{},
		podCIDRs:     map[string]string{},
		pods:         map[key]*v1.Pod{},
		nodes:        map[string]*v1.Node{},
		leases:       map[key]*coordinationv1.Lease{},
		events:       map[key]*v1.Event{},
		eventKeys:    map[string]key{},
		eventRng:     rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15, seed)),
		nodeRng:      rand.New(rand.NewPCG(seed^0x2545f4914f6cdd1d, seed)),
		watchers:     map[*podWatch]struct{}{},
		nodeWatchers: map[string]map[*podWatch]struct{}{},
	}
}

// meta fills what the apiserver assigns on create, a pod's UID keyed by
// its namespace and name (see keyed); s.mu is held.
func (s *Store) meta(m *metav1.ObjectMeta) {
	r := s.keyed("uid", m.Namespace, m.Name)
	s.metaFrom(r, m)
}

// keyed is a random source for the n-th draw under a key: what it gives
// depends on the seed and the key alone, not on what other goroutines
// created before, so concurrent controllers leave a seeded run as it was.
// s.mu is held.
func (s *Store) keyed(parts ...string) *rand.Rand {
	k := strings.Join(parts, "\x00")
	n := s.created[k]
	s.created[k] = n + 1
	h := fnv.New64a()
	h.Write([]byte(k))
	return rand.New(rand.NewPCG(s.seed^h.Sum64(), n^0x5851f42d4c957f2d))
}

// metaFrom is meta with the UID drawn from rng.
func (s *Store) metaFrom(rng *rand.Rand, m *metav1.ObjectMeta) {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	m.UID = types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]))
	m.CreationTimestamp = metav1.NewTime(s.clock.Now().Truncate(time.Second))
	m.Generation = 1
	m.DeletionTimestamp, m.DeletionGracePeriodSeconds = nil, nil
	s.bump(m)
}

func (s *Store) bump(m *metav1.ObjectMeta) {
	s.rv++
	m.ResourceVersion = strconv.FormatUint(s.rv, 10)
}

// checkRV fails an update whose resourceVersion is set and stale.
func checkRV(gr schema.GroupResource, name, have, want string) error {
	if want != "" && want != have {
		return apierrors.NewConflict(gr, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return nil
}

// --- pods

// defaultPod applies the API defaults nodekit relies on.
// defaultTolerations is the apiserver's DefaultTolerationSeconds admission
// plugin: a pod that does not tolerate the not-ready and unreachable
// NoExecute taints tolerates them for 300 s, so that an agent restarted on
// a node still tainted admits its pods, as the kubelet does.
func defaultTolerations(sp *v1.PodSpec) {
	tolerates := func(key string) bool {
		return slices.ContainsFunc(sp.Tolerations, func(t v1.Toleration) bool {
			return (t.Key == key || t.Key == "") && (t.Effect == v1.TaintEffectNoExecute || t.Effect == "")
		})
	}
	for _, key := range []string{v1.TaintNodeNotReady, v1.TaintNodeUnreachable} {
		if !tolerates(key) {
			sp.Tolerations = append(sp.Tolerations, v1.Toleration{Key: key, Operator: v1.TolerationOpExists,
				Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)})
		}
	}
}

func defaultPod(p *v1.Pod) {
	if p.Namespace == "" {
		p.Namespace = metav1.NamespaceDefault
	}
	sp := &p.Spec
	if sp.RestartPolicy == "" {
		sp.RestartPolicy = v1.RestartPolicyAlways
	}
	if sp.TerminationGracePeriodSeconds == nil {
		sp.TerminationGracePeriodSeconds = ptr.To[int64](v1.DefaultTerminationGracePeriodSeconds)
	}
	if sp.DNSPolicy == "" {
		sp.DNSPolicy = v1.DNSClusterFirst
	}
	if sp.SchedulerName == "" {
		sp.SchedulerName = v1.DefaultSchedulerName
	}
	defaultTolerations(sp)
	for _, cs := range [][]v1.Container{sp.InitContainers, sp.Containers} {
		for i := range cs {
			c := &cs[i]
			if c.ImagePullPolicy == "" {
				c.ImagePullPolicy = podutil.PullPolicy(c)
			}
			if c.TerminationMessagePath == "" {
				c.TerminationMessagePath = v1.TerminationMessagePathDefault
			}
			if c.TerminationMessagePolicy == "" {
				c.TerminationMessagePolicy = v1.TerminationMessageReadFile
			}
		}
	}
	if p.Status.Phase == "" {
		p.Status.Phase = v1.PodPending
	}
}

// createPod stores a new pod; the scheduler (s.bind) binds one without a
// node.
func (s *Store) createPod(pod *v1.Pod) (*v1.Pod, error) {
	if pod.Name == "" {
		if pod.GenerateName == "" {
			return nil, apierrors.NewBadRequest("pod: name or generateName is required")
		}
	}
	p := pod.DeepCopy()
	defaultPod(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.Name == "" {
		// Keyed by the prefix: two controllers generating names in one
		// instant get the same names in every run.
		p.Name = p.GenerateName + randSuffix(s.keyed("name", p.Namespace, p.GenerateName))
	}
	k := key{p.Namespace, p.Name}
	if _, ok := s.pods[k]; ok {
		return nil, apierrors.NewAlreadyExists(podsResource, p.Name)
	}
	if p.Spec.NodeName == "" && s.bind != nil && !s.deferBind {
		p.Spec.NodeName = s.bind(p)
	}
	s.meta(&p.ObjectMeta)
	if p.Spec.NodeName != "" {
		setCondition(&p.Status.Conditions, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue,
			LastTransitionTime: p.CreationTimestamp})
	}
	s.pods[k] = p
	s.emitPod(watch.Added, nil, p)
	return p.DeepCopy(), nil
}

func randSuffix(r *rand.Rand) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func setCondition(conds *[]v1.PodCondition, c v1.PodCondition) {
	for i := range *conds {
		if (*conds)[i].Type == c.Type {
			if (*conds)[i].Status != c.Status {
				(*conds)[i] = c
			}
			return
		}
	}
	*conds = append(*conds, c)
}

// histEvent is a pod event and the pod before it, so a replaying watch
// can tell selector transitions.
type histEvent struct {
	watch.Event
	old *v1.Pod
}

// emitPod records a pod event and tells the watchers; s.mu is held.
func (s *Store) emitPod(t watch.EventType, old, p *v1.Pod) {
	ev := watch.Event{Type: t, Object: p}
	if len(s.history) < historySize {
		s.history = append(s.history, histEvent{ev, old})
	} else {
		s.histFrom, _ = strconv.ParseUint(s.history[s.histPos].Object.(*v1.Pod).ResourceVersion, 10, 64)
		s.history[s.histPos] = histEvent{ev, old}
		s.histPos = (s.histPos + 1) % historySize
	}
	for w := range s.watchers {
		w.send(ev, old)
	}
	for w := range s.nodeWatchers[p.Spec.NodeName] {
		w.send(ev, old)
	}
	if old != nil && old.Spec.NodeName != p.Spec.NodeName {
		for w := range s.nodeWatchers[old.Spec.NodeName] {
			w.send(ev, old)
		}
	}
	s.notify(t, old, p)
	if s.onPod != nil {
		if t == watch.Deleted {
			s.onPod(old, nil)
		} else {
			s.onPod(old, p)
		}
	}
}

// updatePod replaces a stored pod (spec and metadata; its status is kept,
// as the apiserver's main resource does).
func (s *Store) updatePod(pod *v1.Pod) (*v1.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{nsOrDefault(pod.Namespace), pod.Name}
	old, ok := s.pods[k]
	if !ok {
		return nil, apierrors.NewNotFound(podsResource, pod.Name)
	}
	if err := checkRV(podsResource, pod.Name, old.ResourceVersion, pod.ResourceVersion); err != nil {
		return nil, err
	}
	p := pod.DeepCopy()
	p.Namespace = k.namespace
	p.UID, p.CreationTimestamp, p.Generation = old.UID, old.CreationTimestamp, old.Generation
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = old.DeletionTimestamp, old.DeletionGracePeriodSeconds
	p.Status = old.Status
	if old.Spec.NodeName != "" {
		p.Spec.NodeName = old.Spec.NodeName // binding is immutable
	}
	defaultPod(p)
	p.Status.Phase = old.Status.Phase
	s.bump(&p.ObjectMeta)
	// The last finalizer of a pod deleted for good (grace 0) removed:
	// the pod goes.
	if len(p.Finalizers) == 0 && p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0 {
		s.pods[k] = p
		s.removePodLocked(p)
		return p.DeepCopy(), nil
	}
	s.pods[k] = p
	s.emitPod(watch.Modified, old, p)
	return p.DeepCopy(), nil
}

func nsOrDefault(ns string) string {
	if ns == "" {
		return metav1.NamespaceDefault
	}
	return ns
}

// patchPodStatus applies a strategic merge patch to a pod's status, as the
// status subresource does: only status changes; a metadata.uid in the
// patch must match.
func (s *Store) patchPodStatus(ns, name string, pt types.PatchType, data []byte) (*v1.Pod, error) {
	if pt != types.StrategicMergePatchType {
		return nil, apierrors.NewBadRequest("sim: only strategic merge patches of pod status are supported, not " + string(pt))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.pods[key{ns, name}]
	if !ok {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	st, uid, err := applyStatusPatch(&old.Status, data)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if uid != "" && uid != old.UID {
		return nil, apierrors.NewConflict(podsResource, name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", uid, old.UID))
	}
	// A copy of the decoded status: the JSON decoder's lists have spare
	// capacity, which every stored pod would keep.
	p := &v1.Pod{TypeMeta: old.TypeMeta}
	old.ObjectMeta.DeepCopyInto(&p.ObjectMeta)
	old.Spec.DeepCopyInto(&p.Spec)
	st.DeepCopyInto(&p.Status)
	s.bump(&p.ObjectMeta)
	s.pods[key{ns, name}] = p
	s.emitPod(watch.Modified, old, p)
	return p.DeepCopy(), nil
}

// deletePod deletes a pod as the apiserver does: at once when it is not
// bound, is terminal, or the grace period is 0; otherwise it sets
// deletionTimestamp and deletionGracePeriodSeconds and leaves the pod to
// its node's agent, which deletes it with grace 0 once the pod is stopped.
// A pod already being deleted gracefully is touched only by a shorter
// grace period given in opts, whatever its phase: a second delete or
// eviction (a controller's cache behind its own first one) of a pod that
// has just turned terminal leaves it to its agent, as the apiserver's
// rest.BeforeDelete does, rather than deleting it in the instant the
// agent's status lands.
func (s *Store) deletePod(ns, name string, opts metav1.DeleteOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[key{ns, name}]
	if !ok {
		return apierrors.NewNotFound(podsResource, name)
	}
	if pc := opts.Preconditions; pc != nil {
		if pc.UID != nil && *pc.UID != p.UID {
			return apierrors.NewConflict(podsResource, name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *pc.UID, p.UID))
		}
		if pc.ResourceVersion != nil && *pc.ResourceVersion != p.ResourceVersion {
			return apierrors.NewConflict(podsResource, name, fmt.Errorf("precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", *pc.ResourceVersion, p.ResourceVersion))
		}
	}
	grace := *p.Spec.TerminationGracePeriodSeconds
	if opts.GracePeriodSeconds != nil {
		grace = max(*opts.GracePeriodSeconds, 0)
	}
	pending := p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds > 0
	if pending && (opts.GracePeriodSeconds == nil || grace >= *p.DeletionGracePeriodSeconds) {
		return nil // deleting already, as fast or faster
	}
	if grace == 0 || (!pending && (p.Spec.NodeName == "" || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed)) {
		if len(p.Finalizers) == 0 {
			s.removePodLocked(p)
			return nil
		}
		// Finalizers hold it, deleted, until they are removed.
		if p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0 {
			return nil
		}
		np := p.DeepCopy()
		now := metav1.NewTime(s.clock.Now().Truncate(time.Second))
		if np.DeletionTimestamp == nil {
			np.DeletionTimestamp = &now
			np.Generation++
		}
		np.DeletionGracePeriodSeconds = ptr.To[int64](0)
		s.bump(&np.ObjectMeta)
		s.pods[key{ns, name}] = np
		s.emitPod(watch.Modified, p, np)
		return nil
	}
	if p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds <= grace {
		return nil // already deleting as fast or faster
	}
	np := p.DeepCopy()
	now := metav1.NewTime(s.clock.Now().Add(time.Duration(grace) * time.Second).Truncate(time.Second))
	np.DeletionTimestamp, np.DeletionGracePeriodSeconds = &now, ptr.To(grace)
	np.Generation++
	s.bump(&np.ObjectMeta)
	s.pods[key{ns, name}] = np
	s.emitPod(watch.Modified, p, np)
	return nil
}

// bindPending binds the unbound pods (see bindPendingLocked) and
// reports whether it bound any.
func (s *Store) bindPending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rv := s.rv
	s.bindPendingLocked()
	return s.rv != rv
}

// bindPendingLocked binds unbound pods, oldest first (by creation second,
// then namespace and name, so that a seeded run places them alike), as a
// scheduler retrying them when nodes change; s.mu is held.
func (s *Store) bindPendingLocked() {
	if s.bind == nil {
		return
	}
	var pending []*v1.Pod
	for _, p := range s.pods {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			pending = append(pending, p)
		}
	}
	sort.Slice(pending, func(i, j int) bool {
		a, b := pending[i], pending[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	for _, old := range pending {
		node := s.bind(old)
		if node == "" {
			return
		}
		p := old.DeepCopy()
		p.Spec.NodeName = node
		setCondition(&p.Status.Conditions, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(s.clock.Now().Truncate(time.Second))})
		s.bump(&p.ObjectMeta)
		s.pods[key{p.Namespace, p.Name}] = p
		s.emitPod(watch.Modified, old, p)
	}
}

func (s *Store) removePodLocked(p *v1.Pod) {
	delete(s.pods, key{p.Namespace, p.Name})
	gone := p.DeepCopy()
	s.bump(&gone.ObjectMeta)
	s.emitPod(watch.Deleted, p, gone)
}

func (s *Store) getPod(ns, name string) (*v1.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[key{ns, name}]
	if !ok {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	return p.DeepCopy(), nil
}

// selectors parses list options; fields are metadata.name,
// metadata.namespace, spec.nodeName and status.phase.
func selectors(opts metav1.ListOptions) (labels.Selector, fields.Selector, error) {
	ls, fs := labels.Everything(), fields.Everything()
	var err error
	if opts.LabelSelector != "" {
		if ls, err = labels.Parse(opts.LabelSelector); err != nil {
			return nil, nil, apierrors.NewBadRequest(err.Error())
		}
	}
	if opts.FieldSelector != "" {
		if fs, err = fields.ParseSelector(opts.FieldSelector); err != nil {
			return nil, nil, apierrors.NewBadRequest(err.Error())
		}
	}
	return ls, fs, nil
}

func podMatches(p *v1.Pod, ns string, ls labels.Selector, fs fields.Selector) bool {
	if ns != "" && p.Namespace != ns {
		return false
	}
	if !ls.Empty() && !ls.Matches(labels.Set(p.Labels)) {
		return false
	}
	return fs.Empty() || fs.Matches(podFields{p})
}

// podFields are the pod's selectable fields; a fields.Fields without a map.
type podFields struct{ p *v1.Pod }

func (f podFields) Has(field string) bool {
	_, ok := f.value(field)
	return ok
}

func (f podFields) Get(field string) string {
	v, _ := f.value(field)
	return v
}

func (f podFields) value(field string) (string, bool) {
	switch field {
	case "metadata.name":
		return f.p.Name, true
	case "metadata.namespace":
		return f.p.Namespace, true
	case "spec.nodeName":
		return f.p.Spec.NodeName, true
	case "status.phase":
		return string(f.p.Status.Phase), true
	}
	return "", false
}

func (s *Store) listPods(ns string, opts metav1.ListOptions) (*v1.PodList, error) {
	ls, fs, err := selectors(opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(s.rv, 10)}}
	for _, p := range s.pods {
		if podMatches(p, ns, ls, fs) {
			out.Items = append(out.Items, *p.DeepCopy())
		}
	}
	sort.Slice(out.Items, func(i, j int) bool {
		a, b := &out.Items[i], &out.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, nil
}

// --- nodes

func (s *Store) getNode(name string) (*v1.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[name]
	if !ok {
		return nil, apierrors.NewNotFound(nodesResource, name)
	}
	return n.DeepCopy(), nil
}

func (s *Store) createNode(node *v1.Node) (*v1.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.nodes[node.Name]; ok || node.Name == "" {
		if node.Name == "" {
			return nil, apierrors.NewBadRequest("node: name is required")
		}
		return nil, apierrors.NewAlreadyExists(nodesResource, node.Name)
	}
	n := node.DeepCopy()
	s.cidrMu.Lock()
	cidr := s.podCIDRs[n.Name]
	s.cidrMu.Unlock()
	if cidr != "" && n.Spec.PodCIDR == "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr}
	}
	s.metaFrom(s.nodeRng, &n.ObjectMeta)
	s.nodes[n.Name] = n
	s.notify(watch.Added, nil, n)
	if s.onNode != nil {
		s.onNode(nil, n)
	}
	if !s.deferBind {
		s.bindPendingLocked()
	}
	return n.DeepCopy(), nil
}

func (s *Store) updateNode(node *v1.Node, status bool) (*v1.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.nodes[node.Name]
	if !ok {
		return nil, apierrors.NewNotFound(nodesResource, node.Name)
	}
	if err := checkRV(nodesResource, node.Name, old.ResourceVersion, node.ResourceVersion); err != nil {
		return nil, err
	}
	n := old.DeepCopy()
	if status {
		n.Status = *node.Status.DeepCopy()
	} else {
		st := n.Status
		n = node.DeepCopy()
		n.Status = st
		n.UID, n.CreationTimestamp = old.UID, old.CreationTimestamp
	}
	s.bump(&n.ObjectMeta)
	s.nodes[n.Name] = n
	s.notify(watch.Modified, old, n)
	if s.onNode != nil {
		s.onNode(old, n)
	}
	if !s.deferBind {
		s.bindPendingLocked()
	}
	return n.DeepCopy(), nil
}

func (s *Store) listNodes() []*v1.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*v1.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, n.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Store) setPodCIDR(node, cidr string) {
	s.cidrMu.Lock()
	defer s.cidrMu.Unlock()
	s.podCIDRs[node] = cidr
}

// --- leases

func (s *Store) getLease(ns, name string) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[key{ns, name}]
	if !ok {
		return nil, apierrors.NewNotFound(leasesResource, name)
	}
	return l.DeepCopy(), nil
}

func (s *Store) createLease(ns string, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{ns, lease.Name}
	if _, ok := s.leases[k]; ok {
		return nil, apierrors.NewAlreadyExists(leasesResource, lease.Name)
	}
	l := lease.DeepCopy()
	l.Namespace = ns
	s.metaFrom(s.nodeRng, &l.ObjectMeta)
	s.leases[k] = l
	s.notify(watch.Added, nil, l)
	return l.DeepCopy(), nil
}

func (s *Store) updateLease(ns string, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{ns, lease.Name}
	old, ok := s.leases[k]
	if !ok {
		return nil, apierrors.NewNotFound(leasesResource, lease.Name)
	}
	if err := checkRV(leasesResource, lease.Name, old.ResourceVersion, lease.ResourceVersion); err != nil {
		return nil, err
	}
	l := lease.DeepCopy()
	l.Namespace = ns
	l.UID, l.CreationTimestamp = old.UID, old.CreationTimestamp
	s.bump(&l.ObjectMeta)
	s.leases[k] = l
	s.notify(watch.Modified, old, l)
	return l.DeepCopy(), nil
}

// --- clients

// PodClient is the store's pods of one namespace ("" for all, as
// client-go's CoreV1().Pods("")); it satisfies apiserver.PodListWatcher and
// status.PodClient.
type PodClient struct {
	s         *Store
	namespace string
}

// Pods returns the pod client of a namespace; "" lists and watches all.
func (s *Store) Pods(namespace string) *PodClient { return &PodClient{s: s, namespace: namespace} }

// ns is the namespace of a single-object call.
func (c *PodClient) ns() string { return nsOrDefault(c.namespace) }

// Get returns a pod.
func (c *PodClient) Get(_ context.Context, name string, _ metav1.GetOptions) (*v1.Pod, error) {
	return c.s.getPod(c.ns(), name)
}

// List lists pods matching opts' label and field selectors (metadata.name,
// metadata.namespace, spec.nodeName, status.phase), sorted by namespace
// and name.
func (c *PodClient) List(_ context.Context, opts metav1.ListOptions) (*v1.PodList, error) {
	return c.s.listPods(c.namespace, opts)
}

// Watch watches pods matching opts from opts.ResourceVersion. As the
// apiserver's, a watch without one (or from "0") first sends every pod it
// selects as Added, then what follows; a resourceVersion older than the
// store's history gets 410 Gone. It ends after TimeoutSeconds on the
// cluster's clock, when ctx ends, or on Stop.
func (c *PodClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.s.watchPods(ctx, c.namespace, opts)
}

// Create creates a pod: the apiserver's defaults, UID, resourceVersion and
// creationTimestamp, Pending; a pod without spec.nodeName is bound by the
// cluster's scheduler: once the cluster is idle (the pods of an instant in
// name order) on its own clock, at once on Config.Clock; or when a node
// becomes Ready.
func (c *PodClient) Create(_ context.Context, pod *v1.Pod, _ metav1.CreateOptions) (*v1.Pod, error) {
	p := pod
	if pod.Namespace != c.ns() {
		if pod.Namespace != "" {
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		p = pod.DeepCopy()
		p.Namespace = c.ns()
	}
	return c.s.createPod(p)
}

// Update replaces a pod's metadata and spec (status is the status
// subresource's); a stale resourceVersion is a Conflict.
func (c *PodClient) Update(_ context.Context, pod *v1.Pod, _ metav1.UpdateOptions) (*v1.Pod, error) {
	p := pod.DeepCopy()
	p.Namespace = c.ns()
	return c.s.updatePod(p)
}

// Patch applies a strategic merge patch to the status
// subresource; patches of the pod itself are not supported.
func (c *PodClient) Patch(_ context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions, subresources ...string) (*v1.Pod, error) {
	if len(subresources) != 1 || subresources[0] != "status" {
		return nil, apierrors.NewMethodNotSupported(podsResource, "patch")
	}
	return c.s.patchPodStatus(c.ns(), name, pt, data)
}

// Delete deletes a pod gracefully, as the apiserver does (see Store).
func (c *PodClient) Delete(_ context.Context, name string, opts metav1.DeleteOptions) error {
	return c.s.deletePod(c.ns(), name, opts)
}

// NodeClient is the store's Nodes; it satisfies node.NodeClient and
// status.NodeGetter.
type NodeClient struct{ s *Store }

// Nodes returns the Node client.
func (s *Store) Nodes() *NodeClient { return &NodeClient{s: s} }

// Get returns a Node.
func (c *NodeClient) Get(_ context.Context, name string, _ metav1.GetOptions) (*v1.Node, error) {
	return c.s.getNode(name)
}

// Create registers a Node.
func (c *NodeClient) Create(_ context.Context, n *v1.Node, _ metav1.CreateOptions) (*v1.Node, error) {
	return c.s.createNode(n)
}

// Update replaces a Node's metadata and spec.
func (c *NodeClient) Update(_ context.Context, n *v1.Node, _ metav1.UpdateOptions) (*v1.Node, error) {
	return c.s.updateNode(n, false)
}

// UpdateStatus replaces a Node's status.
func (c *NodeClient) UpdateStatus(_ context.Context, n *v1.Node, _ metav1.UpdateOptions) (*v1.Node, error) {
	return c.s.updateNode(n, true)
}

// List lists the Nodes, sorted by name (selectors are ignored).
func (c *NodeClient) List(_ context.Context, _ metav1.ListOptions) (*v1.NodeList, error) {
	out := &v1.NodeList{}
	for _, n := range c.s.listNodes() {
		out.Items = append(out.Items, *n)
	}
	return out, nil
}

// LeaseClient is the store's Leases of one namespace; it satisfies
// node.LeaseClient.
type LeaseClient struct {
	s         *Store
	namespace string
}

// Leases returns the Lease client of a namespace.
func (s *Store) Leases(namespace string) *LeaseClient {
	return &LeaseClient{s: s, namespace: namespace}
}

// Get returns a Lease.
func (c *LeaseClient) Get(_ context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	return c.s.getLease(c.namespace, name)
}

// Create creates a Lease.
func (c *LeaseClient) Create(_ context.Context, l *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	return c.s.createLease(c.namespace, l)
}

// Update replaces a Lease.
func (c *LeaseClient) Update(_ context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	return c.s.updateLease(c.namespace, l)
}
