package sim

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Event is one observed change of the store: a pod's phase, readiness,
// container states and restarts, its deletion; a Node's registration,
// readiness and taints. With the cluster's virtual clock, changes are observed each
// time the cluster is idle, so a run's log holds what the controller
// under test could see and is the same for the same seed and scenario.
type Event struct {
	// Time is the virtual time of the change.
	Time time.Time
	// Kind is "Pod" or "Node".
	Kind string
	// Object is namespace/name for pods, the name for Nodes.
	Object string
	// What changed, e.g. "phase Running", "app restarts 2", "app waiting
	// CrashLoopBackOff", "ready True", "deleting", "deleted", "tainted
	// node.kubernetes.io/unreachable:NoExecute", "MemoryPressure True"; for a recorded event,
	// "event <Type> <Reason> (<Source>[, <FieldPath>]): <Message>".
	What string
	// Type ("Normal", "Warning"), Reason, Message, FieldPath and Source
	// are set for an event a component recorded about the object, rather
	// than a change the log saw: an agent's "Killing" or "Unhealthy", the
	// taint eviction's "TaintManagerEviction" (the store's Events have
	// them too). FieldPath names the container of a container's event
	// ("spec.containers{app}"); Source is the node of an agent's event,
	// else the component.
	Type, Reason, Message, FieldPath, Source string
}

// String is the event relative to start, for logs and golden files.
func (e Event) String() string { return fmt.Sprintf("%s %s", e.Time.Format(time.TimeOnly), e.key()) }

func (e Event) key() string { return e.Kind + " " + e.Object + " " + e.What }

// podView is what the log compares of a pod.
type podView struct {
	node, phase, ready string
	deleting           bool
	containers         map[string]ctrView
}

type ctrView struct {
	state    string
	restarts int32
}

func viewOf(p *v1.Pod) *podView {
	pv := &podView{node: p.Spec.NodeName, phase: string(p.Status.Phase), deleting: p.DeletionTimestamp != nil,
		containers: map[string]ctrView{}}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			pv.ready = string(c.Status)
		}
	}
	for _, list := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			st := ""
			switch {
			case cs.State.Running != nil:
				st = "running"
			case cs.State.Terminated != nil:
				st = "terminated " + cs.State.Terminated.Reason + " (" + strconv.Itoa(int(cs.State.Terminated.ExitCode)) + ")"
			case cs.State.Waiting != nil:
				st = "waiting " + cs.State.Waiting.Reason
			}
			pv.containers[cs.Name] = ctrView{state: st, restarts: cs.RestartCount}
		}
	}
	return pv
}

// diffPod appends what changed from a to b (either may be nil).
func diffPod(out []string, a, b *podView) []string {
	switch {
	case b == nil:
		return append(out, "deleted")
	case a == nil:
		out = append(out, "created")
		a = &podView{containers: map[string]ctrView{}}
	}
	if a.node != b.node {
		out = append(out, "bound "+b.node)
	}
	if a.phase != b.phase {
		out = append(out, "phase "+b.phase)
	}
	if a.ready != b.ready && b.ready != "" {
		out = append(out, "ready "+b.ready)
	}
	if !a.deleting && b.deleting {
		out = append(out, "deleting")
	}
	names := make([]string, 0, len(b.containers))
	for n := range b.containers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ac, bc := a.containers[n], b.containers[n]
		if bc.restarts != ac.restarts {
			out = append(out, fmt.Sprintf("%s restarts %d", n, bc.restarts))
		}
		if bc.state != ac.state {
			out = append(out, n+" "+bc.state)
		}
	}
	return out
}

type nodeView struct {
	ready    string
	taints   []string // key[=value]:effect, sorted
	pressure []string // the pressure conditions True, in pressureTaints order
}

func pressureOf(n *v1.Node) []string {
	var out []string
	for _, pt := range pressureTaints {
		if conditionStatus(n, pt.cond) == v1.ConditionTrue {
			out = append(out, string(pt.cond))
		}
	}
	return out
}

func taintsOf(n *v1.Node) []string {
	out := make([]string, 0, len(n.Spec.Taints))
	for _, t := range n.Spec.Taints {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		out = append(out, s+":"+string(t.Effect))
	}
	sort.Strings(out)
	return out
}

// podChanged and nodeChanged note a changed object (under the store's
// lock); the change is logged at the next flush.
func (c *Cluster) podChanged(old, p *v1.Pod) {
	if c.evictor != nil {
		c.evictor.podChanged(old, p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := key{}
	if p != nil {
		k = key{p.Namespace, p.Name}
	} else {
		k = key{old.Namespace, old.Name}
	}
	if (old == nil || old.Spec.NodeName == "") && p != nil && p.Spec.NodeName != "" {
		c.counts[p.Spec.NodeName]++ // bound
	}
	if old != nil && p == nil && old.Spec.NodeName != "" {
		c.counts[old.Spec.NodeName]--
	}
	if c.noLog {
		return
	}
	c.dirtyPods[k] = p
	if c.vc == nil {
		c.flushLocked()
	}
}

func (c *Cluster) nodeChanged(old, n *v1.Node) {
	if c.evictor != nil {
		c.evictor.nodeChanged(old, n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.noLog {
		return
	}
	c.dirtyNodes[n.Name] = n
	if c.vc == nil {
		c.flushLocked()
	}
}

// flushLocked logs the changes noted since the last flush, in a stable
// order; c.mu is held.
func (c *Cluster) flushLocked() {
	if len(c.dirtyPods) == 0 && len(c.dirtyNodes) == 0 && len(c.recorded) == 0 {
		return
	}
	now := c.clock.Now()
	evs := c.recorded
	c.recorded = nil
	for name, n := range c.dirtyNodes {
		ready := string(readyStatus(n))
		old, seen := c.nodeViews[name]
		if !seen {
			evs = append(evs, Event{Time: now, Kind: "Node", Object: name, What: "registered"})
		}
		if ready != old.ready && ready != "" {
			evs = append(evs, Event{Time: now, Kind: "Node", Object: name, What: "ready " + ready})
		}
		taints := taintsOf(n)
		for _, t := range taints {
			if !slices.Contains(old.taints, t) {
				evs = append(evs, Event{Time: now, Kind: "Node", Object: name, What: "tainted " + t})
			}
		}
		for _, t := range old.taints {
			if !slices.Contains(taints, t) {
				evs = append(evs, Event{Time: now, Kind: "Node", Object: name, What: "untainted " + t})
			}
		}
		// Pressure is logged as it comes and goes (a Node without it
		// logs nothing).
		pressure := pressureOf(n)
		for _, p := range pressure {
			if !slices.Contains(old.pressure, p) {
				evs = append(evs, Event{Time: now, Kind: "Node", Object: name, What: p + " True"})
			}
		}
		for _, p := range old.pressure {
			if !slices.Contains(pressure, p) {
				evs = append(evs, Event{Time: now, Kind: "Node", Object: name, What: p + " False"})
			}
		}
		c.nodeViews[name] = nodeView{ready: ready, taints: taints, pressure: pressure}
	}
	for k, p := range c.dirtyPods {
		var b *podView
		if p != nil {
			b = viewOf(p)
		}
		a := c.podViews[k]
		if a == nil && b == nil {
			continue
		}
		for _, w := range diffPod(nil, a, b) {
			evs = append(evs, Event{Time: now, Kind: "Pod", Object: k.namespace + "/" + k.name, What: w})
		}
		if b == nil {
			delete(c.podViews, k)
		} else {
			c.podViews[k] = b
		}
	}
	clear(c.dirtyPods)
	clear(c.dirtyNodes)
	// An object's recorded events come before the changes the log saw,
	// in text order: the components that record them in one instant may
	// run in any order.
	sort.SliceStable(evs, func(i, j int) bool {
		a, b := &evs[i], &evs[j]
		switch {
		case !a.Time.Equal(b.Time):
			return a.Time.Before(b.Time)
		case a.Kind != b.Kind:
			return a.Kind > b.Kind // Pods, then Nodes
		case a.Object != b.Object:
			return a.Object < b.Object
		case (a.Source != "") != (b.Source != ""):
			return a.Source != ""
		case a.Source != "":
			return a.What < b.What
		}
		return false
	})
	c.log = append(c.log, evs...)
}

// Events returns the log so far (see Event).
func (c *Cluster) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked()
	return append([]Event(nil), c.log...)
}
