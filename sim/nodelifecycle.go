package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// The node lifecycle controller (kube-controller-manager's nodelifecycle),
// as far as a pod's life depends on it: a Node whose Lease and Ready
// heartbeat are older than NodeMonitorGracePeriod is marked Unknown and its
// pods not Ready; from the next pass on, a Node whose Ready condition is
// Unknown is tainted node.kubernetes.io/unreachable:NoExecute, one that
// reports False node.kubernetes.io/not-ready:NoExecute (the two swap when
// the condition does), and one Ready again loses both. Tainting is rate
// limited per zone as the controller's (0.1 nodes/s, burst 1), stops in a
// zone of at most 50 nodes of which 55 % and more than two are not Ready,
// and stops everywhere, with the taints removed, while no node of any zone
// is Ready (the controller's disruption modes: a control plane cut off from
// every node evicts nothing). The taint eviction controller acts on the
// taints.

// The controller's defaults (kube-controller-manager's flags).
const (
	nodeEvictionRate          = 0.1  // --node-eviction-rate
	secondaryNodeEvictionRate = 0.01 // --secondary-node-eviction-rate
	largeClusterSizeThreshold = 50   // --large-cluster-size-threshold
	unhealthyZoneThreshold    = 0.55 // --unhealthy-zone-threshold
	// labelExcludeDisruption keeps a node out of its zone's state.
	labelExcludeDisruption = "node.kubernetes.io/exclude-disruption"
)

// UnreachableTaint is what the node lifecycle controller puts on a Node
// whose kubelet stopped posting status (Ready Unknown).
var UnreachableTaint = v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}

// NotReadyTaint is what the node lifecycle controller puts on a Node whose
// kubelet reports it not Ready (Ready False).
var NotReadyTaint = v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute}

type zoneState int

const (
	zoneInitial zoneState = iota
	zoneNormal
	zonePartialDisruption
	zoneFullDisruption
)

// lifecycle is the controller's state, owned by monitorNodes' goroutine.
type lifecycle struct {
	known    map[string]bool
	states   map[string]zoneState // zones with nodes, by zoneKey
	tainters map[string]*tainter  // kept when a zone empties, as the controller's
}

// tainter is a zone's queue of nodes to taint NoExecute behind a token
// bucket of burst 1 (the controller's RateLimitedTimedQueue). A node stays
// in set once processed until removed, so it is queued again only after.
type tainter struct {
	qps   float64   // 0: never
	next  time.Time // when the bucket holds a token again
	set   map[string]bool
	queue map[string]time.Time // waiting, by when added
}

func newTainter(qps float64) *tainter {
	return &tainter{qps: qps, set: map[string]bool{}, queue: map[string]time.Time{}}
}

func (t *tainter) tryAccept(now time.Time) bool {
	if t.qps <= 0 || now.Before(t.next) {
		return false
	}
	t.next = now.Add(time.Duration(float64(time.Second) / t.qps))
	return true
}

// swap changes the rate; a new bucket starts empty if the old one was.
func (t *tainter) swap(qps float64, now time.Time) {
	if qps == t.qps {
		return
	}
	empty := !t.tryAccept(now)
	t.qps, t.next = qps, time.Time{}
	if empty {
		t.tryAccept(now)
	}
}

func (t *tainter) add(name string, now time.Time) {
	if !t.set[name] {
		t.set[name], t.queue[name] = true, now
	}
}

func (t *tainter) remove(name string) {
	delete(t.set, name)
	delete(t.queue, name)
}

// head is the node waiting longest (ties: name order).
func (t *tainter) head() (string, bool) {
	best, at := "", time.Time{}
	for n, added := range t.queue {
		if best == "" || added.Before(at) || (added.Equal(at) && n < best) {
			best, at = n, added
		}
	}
	return best, best != ""
}

// zoneKey is the node's zone as the controller keys it: region and zone
// labels, "" without either.
func zoneKey(n *v1.Node) string {
	zone, ok := n.Labels[v1.LabelTopologyZone]
	if !ok {
		zone = n.Labels[v1.LabelFailureDomainBetaZone]
	}
	region, ok := n.Labels[v1.LabelTopologyRegion]
	if !ok {
		region = n.Labels[v1.LabelFailureDomainBetaRegion]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// monitorNodes runs the controller: a health pass every NodeMonitorPeriod,
// each followed by a tainting pass, and a tainting pass when the rate
// limit next lets a waiting node through.
func (c *Cluster) monitorNodes(ctx context.Context) {
	t := c.clock.NewTicker(c.cfg.NodeMonitorPeriod)
	defer t.Stop()
	lc := &lifecycle{known: map[string]bool{}, states: map[string]zoneState{}, tainters: map[string]*tainter{}}
	var wake clock.Timer
	defer func() {
		if wake != nil {
			wake.Stop()
		}
	}()
	for {
		var wakeC <-chan time.Time
		if wake != nil {
			wakeC = wake.C()
		}
		tick := false
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			tick = true
		case <-wakeC:
		}
		// A tick and a wake-up due at the same instant: the health pass
		// first, whichever the select took.
		if !tick {
			select {
			case <-t.C():
				tick = true
			default:
			}
		}
		if tick {
			c.checkNodes(lc)
		}
		now := c.clock.Now()
		if at, ok := c.taintNodes(lc, now); ok {
			if wake == nil {
				wake = c.clock.NewTimer(at.Sub(now))
			} else {
				wake.Reset(at.Sub(now))
			}
		} else if wake != nil {
			wake.Stop()
		}
	}
}

// checkNodes is one health pass (monitorNodeHealth).
func (c *Cluster) checkNodes(lc *lifecycle) {
	now := c.clock.Now()
	s := c.store
	nodes := s.listNodes()
	zoneReady := map[string][]v1.ConditionStatus{}
	for _, n := range nodes {
		zk := zoneKey(n)
		if _, ok := lc.states[zk]; !ok {
			lc.states[zk] = zoneInitial
			lc.tainters[zk] = newTainter(nodeEvictionRate)
		}
		if !lc.known[n.Name] {
			lc.known[n.Name] = true
			c.markReachable(lc, n)
		}
		observed := readyStatus(n)
		current := observed
		if observed != "" && observed != v1.ConditionUnknown && c.leaseExpired(n, now) && c.markUnknown(n, now) {
			current = v1.ConditionUnknown
			if observed == v1.ConditionTrue {
				c.markPodsNotReady(n.Name, now)
			}
		}
		if _, excluded := n.Labels[labelExcludeDisruption]; !excluded {
			zoneReady[zk] = append(zoneReady[zk], current)
		}
		if current != "" {
			c.taintByCondition(lc, n, observed, now)
		}
	}
	c.handleDisruption(lc, zoneReady, nodes, now)
}

// leaseExpired: neither the Lease nor the Ready heartbeat was renewed
// within NodeMonitorGracePeriod.
func (c *Cluster) leaseExpired(n *v1.Node, now time.Time) bool {
	var renewed time.Time
	if l, err := c.store.getLease(v1.NamespaceNodeLease, n.Name); err == nil && l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
	}
	if ready := readyCondition(n); ready != nil && ready.LastHeartbeatTime.After(renewed) {
		renewed = ready.LastHeartbeatTime.Time
	}
	return !renewed.IsZero() && now.Sub(renewed) > c.cfg.NodeMonitorGracePeriod
}

func readyCondition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// readyStatus is the status of the Node's Ready condition, "" without one.
func readyStatus(n *v1.Node) v1.ConditionStatus {
	if r := readyCondition(n); r != nil {
		return r.Status
	}
	return ""
}

// markUnknown sets the Node's conditions to Unknown ("Kubelet stopped
// posting node status."); false if the Node changed meanwhile (next pass).
func (c *Cluster) markUnknown(n *v1.Node, now time.Time) bool {
	t := metav1.NewTime(now)
	n = n.DeepCopy()
	for i := range n.Status.Conditions {
		cond := &n.Status.Conditions[i]
		if cond.Status == v1.ConditionUnknown {
			continue
		}
		cond.Status, cond.Reason, cond.Message = v1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
		cond.LastTransitionTime = t
	}
	_, err := c.store.updateNode(n, true)
	return err == nil
}

// markPodsNotReady sets the Ready condition of the node's pods to False.
func (c *Cluster) markPodsNotReady(node string, now time.Time) {
	s := c.store
	l, _ := s.listPods("", metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"False","lastTransitionTime":%q}]}}`, now.UTC().Format(time.RFC3339))
	for i := range l.Items {
		p := &l.Items[i]
		_, _ = s.patchPodStatus(p.Namespace, p.Name, "application/strategic-merge-patch+json", []byte(patch))
	}
}

// taintByCondition is processTaintBaseEviction: on the Ready condition as
// the pass found it, the opposite taint is swapped at once, a missing one
// queued for the rate-limited tainting pass, and a Ready node untainted.
func (c *Cluster) taintByCondition(lc *lifecycle, n *v1.Node, observed v1.ConditionStatus, now time.Time) {
	if observed == v1.ConditionTrue {
		c.markReachable(lc, n)
		return
	}
	want, other, ok := taintFor(observed)
	if !ok {
		return
	}
	if hasTaint(n, other) {
		c.swapTaints(n.Name, want, other)
		return
	}
	t := lc.tainters[zoneKey(n)]
	if !hasTaint(n, want) {
		t.remove(n.Name)
	}
	t.add(n.Name, now)
}

// taintFor is the NoExecute taint a Ready condition of status calls for
// and the other one, which it replaces; false for True or no condition.
func taintFor(status v1.ConditionStatus) (want, other v1.Taint, ok bool) {
	switch status {
	case v1.ConditionFalse:
		return NotReadyTaint, UnreachableTaint, true
	case v1.ConditionUnknown:
		return UnreachableTaint, NotReadyTaint, true
	}
	return v1.Taint{}, v1.Taint{}, false
}

// markReachable removes both NoExecute taints and forgets the node's place
// in its zone's queue.
func (c *Cluster) markReachable(lc *lifecycle, n *v1.Node) {
	for _, taint := range []v1.Taint{UnreachableTaint, NotReadyTaint} {
		if hasTaint(n, taint) {
			c.updateTaints(n.Name, func(ts []v1.Taint) []v1.Taint {
				return slices.DeleteFunc(ts, func(t v1.Taint) bool { return t.MatchTaint(&taint) })
			})
		}
	}
	lc.tainters[zoneKey(n)].remove(n.Name)
}

// handleDisruption computes each zone's state from its nodes' Ready
// conditions and sets the zones' tainting rates; while no node anywhere is
// Ready, every node loses its NoExecute taints and none is tainted.
func (c *Cluster) handleDisruption(lc *lifecycle, zoneReady map[string][]v1.ConditionStatus, nodes []*v1.Node, now time.Time) {
	newStates := map[string]zoneState{}
	allFull := true
	for zk, ready := range zoneReady {
		newStates[zk] = zoneStateOf(ready)
		if newStates[zk] != zoneFullDisruption {
			allFull = false
		}
	}
	allWasFull := true
	for zk, st := range lc.states {
		if _, ok := zoneReady[zk]; !ok {
			delete(lc.states, zk)
			continue
		}
		if st != zoneFullDisruption {
			allWasFull = false
		}
	}
	if allFull && allWasFull {
		return
	}
	zones := slices.Sorted(maps.Keys(lc.states))
	switch {
	case allFull:
		for _, n := range nodes {
			c.markReachable(lc, n)
		}
		for _, zk := range zones {
			lc.tainters[zk].swap(0, now)
			lc.states[zk] = zoneFullDisruption
		}
	default:
		// Leaving full disruption, the controller renews every node's
		// probe time; the nodes are all Unknown or False by then, so that
		// changes nothing here.
		for _, zk := range zones {
			if st := newStates[zk]; st != lc.states[zk] || allWasFull {
				lc.tainters[zk].swap(zoneRate(st, len(zoneReady[zk])), now)
				lc.states[zk] = st
			}
		}
	}
}

func zoneStateOf(ready []v1.ConditionStatus) zoneState {
	notReady := 0
	for _, r := range ready {
		if r != v1.ConditionTrue {
			notReady++
		}
	}
	switch {
	case notReady > 0 && notReady == len(ready):
		return zoneFullDisruption
	case notReady > 2 && float64(notReady)/float64(len(ready)) >= unhealthyZoneThreshold:
		return zonePartialDisruption
	}
	return zoneNormal
}

// zoneRate is a zone's tainting rate in a state: a partly disrupted zone
// is tainted slowly if large, not at all if small; a fully disrupted one
// (while others are not) at the normal rate.
func zoneRate(st zoneState, size int) float64 {
	if st == zonePartialDisruption {
		if size > largeClusterSizeThreshold {
			return secondaryNodeEvictionRate
		}
		return 0
	}
	return nodeEvictionRate
}

// taintNodes is the tainting pass (doNoExecuteTaintingPass): each zone
// taints its waiting nodes as far as its rate allows, by their Ready
// condition now. It returns when the rate next lets a waiting node
// through, if one waits.
func (c *Cluster) taintNodes(lc *lifecycle, now time.Time) (time.Time, bool) {
	var wake time.Time
	for _, zk := range slices.Sorted(maps.Keys(lc.tainters)) {
		t := lc.tainters[zk]
		for {
			name, ok := t.head()
			if !ok {
				break
			}
			if !t.tryAccept(now) {
				if t.qps > 0 && (wake.IsZero() || t.next.Before(wake)) {
					wake = t.next
				}
				break
			}
			delete(t.queue, name)
			n, err := c.store.getNode(name)
			if err != nil {
				continue
			}
			if want, other, ok := taintFor(readyStatus(n)); ok {
				c.swapTaints(name, want, other)
			}
		}
	}
	return wake, !wake.IsZero()
}

func hasTaint(n *v1.Node, taint v1.Taint) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.MatchTaint(&taint) })
}

// swapTaints adds add (stamped with the time) and then removes del, two
// updates as the controller's SwapNodeControllerTaint.
func (c *Cluster) swapTaints(node string, add, del v1.Taint) {
	now := metav1.NewTime(c.clock.Now())
	add.TimeAdded = &now
	c.updateTaints(node, func(ts []v1.Taint) []v1.Taint {
		for i := range ts {
			if ts[i].MatchTaint(&add) {
				ts[i] = add
				return ts
			}
		}
		return append(ts, add)
	})
	c.updateTaints(node, func(ts []v1.Taint) []v1.Taint {
		return slices.DeleteFunc(ts, func(t v1.Taint) bool { return t.MatchTaint(&del) })
	})
}

// updateTaints updates the Node's taints with f if that changes them,
// reading it again after a conflict.
func (c *Cluster) updateTaints(node string, f func([]v1.Taint) []v1.Taint) {
	for range 5 {
		n, err := c.store.getNode(node)
		if err != nil {
			return
		}
		taints := f(slices.Clone(n.Spec.Taints))
		if equality.Semantic.DeepEqual(taints, n.Spec.Taints) {
			return
		}
		n.Spec.Taints = taints
		if _, err := c.store.updateNode(n, false); !apierrors.IsConflict(err) {
			return
		}
	}
}
