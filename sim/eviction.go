package sim

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// The taint eviction controller (kube-controller-manager's
// taint-eviction-controller): a pod bound to a Node with NoExecute taints
// is deleted, gracefully as by any client, at once if it does not tolerate
// them all, after the least tolerationSeconds of the tolerations that
// match if all have one, never if one matching tolerates without; the
// time counts from when the controller first saw the pod tolerating
// taints on its node, and a taint gone, a toleration added or the pod
// deleted before then cancels the eviction. Before deleting it sets the
// pod's DisruptionTarget condition. Its events, "Marking for deletion Pod
// <namespace>/<name>" and "Cancelling deletion of Pod ...", reason
// TaintManagerEviction, go to the event log.

// TaintEvictionController is the Source of the taint eviction's events.
const TaintEvictionController = "taint-eviction-controller"

// evictor is the controller. Store changes that may matter (a Node's
// NoExecute taints, a pod's tolerations or node) are noted by the store's
// hooks and handled in run's goroutine, in name order, so that a run is
// reproducible.
type evictor struct {
	c   *Cluster
	rec *recorder

	mu    sync.Mutex
	nodes map[string]bool // Nodes whose NoExecute taints changed
	pods  map[key]string  // pods changed, with their node
	wake  chan struct{}

	// Owned by run's goroutine.
	tainted map[string][]v1.Taint // NoExecute taints by node
	work    map[key]time.Time     // evictions due later, by when
}

func newEvictor(c *Cluster) *evictor {
	return &evictor{c: c, rec: &recorder{c: c, source: v1.EventSource{Component: TaintEvictionController}},
		nodes: map[string]bool{}, pods: map[key]string{}, wake: make(chan struct{}, 1),
		tainted: map[string][]v1.Taint{}, work: map[key]time.Time{}}
}

func noExecute(taints []v1.Taint) []v1.Taint {
	var out []v1.Taint
	for _, t := range taints {
		if t.Effect == v1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

func (e *evictor) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// nodeChanged notes a Node whose NoExecute taints changed (store's lock
// held).
func (e *evictor) nodeChanged(old, n *v1.Node) {
	if old != nil && equality.Semantic.DeepEqual(noExecute(old.Spec.Taints), noExecute(n.Spec.Taints)) {
		return
	}
	e.mu.Lock()
	e.nodes[n.Name] = true
	e.mu.Unlock()
	e.signal()
}

// podChanged notes a pod created, deleted, or whose tolerations or node
// changed (store's lock held).
func (e *evictor) podChanged(old, p *v1.Pod) {
	cur := p
	if cur == nil {
		cur = old
	}
	if cur.Spec.NodeName == "" {
		return
	}
	if old != nil && p != nil && old.Spec.NodeName == p.Spec.NodeName &&
		equality.Semantic.DeepEqual(old.Spec.Tolerations, p.Spec.Tolerations) {
		return
	}
	e.mu.Lock()
	e.pods[key{cur.Namespace, cur.Name}] = cur.Spec.NodeName
	e.mu.Unlock()
	e.signal()
}

// run handles the noted changes and the evictions as they fall due until
// ctx ends.
func (e *evictor) run(ctx context.Context) {
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var due <-chan time.Time
		if timer != nil {
			due = timer.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		case <-due:
		}
		now := e.c.clock.Now()
		e.mu.Lock()
		var nodes map[string]bool
		var pods map[key]string
		if len(e.nodes) > 0 {
			nodes, e.nodes = e.nodes, map[string]bool{}
		}
		if len(e.pods) > 0 {
			pods, e.pods = e.pods, map[key]string{}
		}
		e.mu.Unlock()
		// Nodes first, as the controller's workers take them first.
		for _, n := range slices.Sorted(maps.Keys(nodes)) {
			e.handleNode(n, now)
		}
		for _, k := range slices.SortedFunc(maps.Keys(pods), compareKeys) {
			e.handlePod(k, pods[k], now)
		}
		next, ok := e.fireDue(now)
		switch {
		case !ok && timer != nil:
			timer.Stop()
		case ok && timer == nil:
			timer = e.c.clock.NewTimer(next.Sub(now))
		case ok:
			timer.Reset(next.Sub(now))
		}
	}
}

func compareKeys(a, b key) int {
	return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
}

// handleNode takes a Node's NoExecute taints and weighs its pods against
// them; a Node without cancels its pods' evictions.
func (e *evictor) handleNode(name string, now time.Time) {
	n, err := e.c.store.getNode(name)
	if err != nil {
		delete(e.tainted, name)
		return
	}
	taints := noExecute(n.Spec.Taints)
	if len(taints) == 0 {
		delete(e.tainted, name)
	} else {
		e.tainted[name] = taints
	}
	pods, _ := e.c.store.listPods("", metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	for i := range pods.Items {
		p := &pods.Items[i]
		k := key{p.Namespace, p.Name}
		if len(taints) == 0 {
			e.cancel(k)
			continue
		}
		e.weigh(k, p.Spec.Tolerations, taints, now)
	}
}

// handlePod weighs a changed pod against its node's taints, and cancels
// the eviction of a deleted one.
func (e *evictor) handlePod(k key, node string, now time.Time) {
	taints, tainted := e.tainted[node]
	if _, scheduled := e.work[k]; !scheduled && !tainted {
		return
	}
	p, err := e.c.store.getPod(k.namespace, k.name)
	if apierrors.IsNotFound(err) {
		e.cancel(k)
		return
	}
	if err != nil || p.Spec.NodeName != node || !tainted {
		return
	}
	e.weigh(k, p.Spec.Tolerations, taints, now)
}

// weigh is the controller's processPodOnNode.
func (e *evictor) weigh(k key, tolerations []v1.Toleration, taints []v1.Taint, now time.Time) {
	used, all := matchingTolerations(taints, tolerations)
	if !all {
		e.cancel(k)
		e.evict(k)
		return
	}
	wait := minTolerationTime(used)
	if wait < 0 {
		e.cancel(k)
		return
	}
	// A scheduled eviction stands, whatever the tolerations say now: the
	// controller keeps one created before now (start+wait < now+wait),
	// which on a real clock any earlier one is.
	if _, ok := e.work[k]; ok {
		return
	}
	if wait == 0 {
		e.evict(k)
		return
	}
	e.work[k] = now.Add(wait)
}

// matchingTolerations returns, for each taint, the first toleration that
// tolerates it; all is false if one is not tolerated.
func matchingTolerations(taints []v1.Taint, tolerations []v1.Toleration) (used []v1.Toleration, all bool) {
	for i := range taints {
		j := slices.IndexFunc(tolerations, func(t v1.Toleration) bool {
			// Comparison operators (Lt, Gt) are alpha and off.
			return t.ToleratesTaint(logr.Discard(), &taints[i], false)
		})
		if j < 0 {
			return nil, false
		}
		used = append(used, tolerations[j])
	}
	return used, true
}

// minTolerationTime is the least tolerationSeconds of the tolerations, 0
// for none or one not positive, -1 when none has one (forever).
func minTolerationTime(tolerations []v1.Toleration) time.Duration {
	if len(tolerations) == 0 {
		return 0
	}
	least := int64(math.MaxInt64)
	for _, t := range tolerations {
		if t.TolerationSeconds != nil {
			if *t.TolerationSeconds <= 0 {
				return 0
			}
			least = min(least, *t.TolerationSeconds)
		}
	}
	if least == math.MaxInt64 {
		return -1
	}
	return time.Duration(least) * time.Second
}

// cancel drops a pod's pending eviction, with an event if there was one.
func (e *evictor) cancel(k key) {
	if _, ok := e.work[k]; !ok {
		return
	}
	delete(e.work, k)
	e.rec.Eventf(podRef(k), v1.EventTypeNormal, "TaintManagerEviction", "Cancelling deletion of Pod %s/%s", k.namespace, k.name)
}

func podRef(k key) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: k.namespace, Name: k.name}
}

// fireDue evicts the pods whose time has come, in time and name order,
// and returns when the next one is due.
func (e *evictor) fireDue(now time.Time) (time.Time, bool) {
	var due []key
	var next time.Time
	for k, fire := range e.work {
		switch {
		case !fire.After(now):
			due = append(due, k)
		case next.IsZero() || fire.Before(next):
			next = fire
		}
	}
	slices.SortFunc(due, func(a, b key) int {
		return cmp.Or(e.work[a].Compare(e.work[b]), compareKeys(a, b))
	})
	for _, k := range due {
		delete(e.work, k)
		e.evict(k)
	}
	return next, !next.IsZero()
}

// evict records the eviction, sets the pod's DisruptionTarget condition
// and deletes it gracefully (deletePodHandler).
func (e *evictor) evict(k key) {
	e.rec.Eventf(podRef(k), v1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s/%s", k.namespace, k.name)
	s := e.c.store
	p, err := s.getPod(k.namespace, k.name)
	if err != nil {
		return
	}
	const reason, message = "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint"
	var cur *v1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.DisruptionTarget {
			cur = &p.Status.Conditions[i]
		}
	}
	if cur == nil || cur.Status != v1.ConditionTrue || cur.Reason != reason || cur.Message != message {
		transition := ""
		if cur == nil || cur.Status != v1.ConditionTrue {
			transition = fmt.Sprintf(`,"lastTransitionTime":%q`, e.c.clock.Now().UTC().Format(time.RFC3339))
		}
		patch := fmt.Sprintf(`{"metadata":{"uid":%q},"status":{"conditions":[{"type":%q,"status":"True","reason":%q,"message":%q%s}]}}`,
			p.UID, v1.DisruptionTarget, reason, message, transition)
		if _, err := s.patchPodStatus(k.namespace, k.name, "application/strategic-merge-patch+json", []byte(patch)); err != nil {
			return
		}
	}
	_ = s.deletePod(k.namespace, k.name, metav1.DeleteOptions{})
}
