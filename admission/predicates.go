package admission

import (
	"cmp"
	"fmt"
	"net"
	goruntime "runtime"
	"slices"
	"strconv"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/cm"
	"github.com/nodekit/nodekit/podutil"
)

// Rejection reasons of GeneralPredicates, the kubelet's.
const (
	ReasonOSSelectorMismatch = "PodOSSelectorNodeLabelDoesNotMatch"
	ReasonOSNotSupported     = "PodOSNotSupported"
	ReasonNodeAffinity       = "NodeAffinity"
	ReasonNodeName           = "NodeName"
	ReasonNodePorts          = "NodePorts"
	ReasonTaintToleration    = "TaintToleration"
	// ReasonOutOfPrefix prefixes the name of a resource the node lacks:
	// OutOfcpu, OutOfmemory, OutOfephemeral-storage, OutOfexample.com/gpu.
	ReasonOutOfPrefix = "OutOf"
)

// The scheduler's descriptions of the failed predicates, which the
// kubelet's messages carry.
const (
	descNodeAffinity    = "node(s) didn't match Pod's node affinity/selector"
	descNodeName        = "node(s) didn't match the requested node name"
	descNodePorts       = "node(s) didn't have free ports for the requested pod ports"
	descTaintToleration = "node(s) had taints that the pod didn't tolerate"
)

// GeneralPredicates checks a pod against the node as the kubelet's predicate
// admit handler does (pkg/kubelet/lifecycle/predicate.go), for pods that
// reach a node without the scheduler (static pods, pods created with
// spec.nodeName) or that the node no longer fits:
//
//   - the pod's kubernetes.io/os label and spec.os against the node's OS
//     (its kubernetes.io/os label, else the agent's own);
//   - resources: the pods count and every resource the pod requests (cpu,
//     memory, ephemeral-storage, hugepages, extended resources the node
//     has; extended resources it does not have are cluster-level and not
//     checked), against the node's allocatable less what OtherPods request,
//     requests computed as the kubelet's PodRequests (init containers,
//     sidecars, overhead, pod-level resources);
//   - spec.nodeSelector and required node affinity against its labels and
//     name;
//   - spec.nodeName;
//   - host ports against OtherPods' (containers' and sidecars');
//   - NoExecute taints the pod does not tolerate, static pods excepted.
//
// The first failure is the result, with the kubelet's reason (OutOfcpu,
// NodeAffinity, ...) and message. node returns the Node as last known; while
// it returns nil (not registered yet), the pod is admitted unchecked: an
// agent that registers its Node uses GeneralPredicatesOrInitial.
func GeneralPredicates(node func() *v1.Node) PodAdmitHandler {
	return GeneralPredicatesOrInitial(node, nil)
}

// GeneralPredicatesOrInitial is GeneralPredicates for an agent that
// registers its Node, as the kubelet's getNodeAnyWay: a pod is checked
// against registered() once it returns the Node, and before that against
// initial(), the Node the agent would register
// (node.Controller.InitialNode: its labels, taints, capacity and
// allocatable), so that pods admitted before registration are checked
// too, without waiting for the apiserver. Against the initial Node one
// check is left out: a spec.nodeSelector or required node affinity it does
// not match admits the pod, since a Node registered before (an agent
// restarted) may carry labels others gave it, which the kubelet, on such a
// miss, reads from the apiserver and the agent does not wait for. initial
// nil, or returning nil, admits pods unchecked until registration.
func GeneralPredicatesOrInitial(registered, initial func() *v1.Node) PodAdmitHandler {
	return GeneralPredicatesWithPreemption(registered, initial, nil)
}

// GeneralPredicatesWithoutResources is GeneralPredicatesOrInitial without
// the resources check (the pods count, cpu, memory, ...): virtual-kubelet's
// behaviour for a provider, whose capacity is what it advertises to the
// scheduler and whose CreatePod decides whether a pod fits. A pod bound
// past the capacity runs if the provider takes it, rather than failing
// OutOfpods for good. The OS, node name, affinity, host port and NoExecute
// taint checks stay.
func GeneralPredicatesWithoutResources(registered, initial func() *v1.Node) PodAdmitHandler {
	return PodAdmitHandlerFunc(func(attrs *PodAdmitAttributes) PodAdmitResult {
		n, affinity := registered(), true
		if n == nil && initial != nil {
			n, affinity = initial(), false
		}
		if n == nil {
			return PodAdmitResult{Admit: true}
		}
		used := attrs.OtherPodsUsage
		if used == nil {
			used = NewUsage(attrs.OtherPods)
		}
		return checkNodeOther(attrs.Pod, used, n, affinity)
	})
}

// checkNode checks pod against node, its node selector and affinity only
// if affinity is set: the first failure, and apart from it every resource
// the node is short of and the first failure of another kind (for a
// critical pod's preemption).
func checkNode(attrs *PodAdmitAttributes, node *v1.Node, affinity bool) (first PodAdmitResult, short []shortage, other PodAdmitResult) {
	pod := attrs.Pod
	used := attrs.OtherPodsUsage
	if used == nil {
		used = NewUsage(attrs.OtherPods)
	}
	other = checkNodeOther(pod, used, node, affinity)
	if !other.Admit && (other.Reason == ReasonOSSelectorMismatch || other.Reason == ReasonOSNotSupported) {
		return other, nil, other // checked before resources, as the kubelet
	}
	short = shortages(pod, used, node.Status.Allocatable)
	if len(short) > 0 {
		return short[0].result(), short, other
	}
	return other, nil, other
}

// checkNodeOther is every check of generalPredicates but resources', the
// first failure.
func checkNodeOther(pod *v1.Pod, used *Usage, node *v1.Node, affinity bool) PodAdmitResult {
	nodeOS := node.Labels[v1.LabelOSStable]
	if nodeOS == "" {
		nodeOS = goruntime.GOOS
	}
	if os, ok := pod.Labels[v1.LabelOSStable]; ok && os != nodeOS {
		return PodAdmitResult{Reason: ReasonOSSelectorMismatch,
			Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != nodeOS {
		return PodAdmitResult{Reason: ReasonOSNotSupported, Message: "Failed to admit pod as the OS field doesn't match node OS"}
	}
	predicate := func(reason, desc string) PodAdmitResult {
		return PodAdmitResult{Reason: reason, Message: fmt.Sprintf("Predicate %s failed: %s", reason, desc)}
	}
	if affinity && !matchesNodeAffinity(pod, node) {
		return predicate(ReasonNodeAffinity, descNodeAffinity)
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return predicate(ReasonNodeName, descNodeName)
	}
	if !fitsHostPorts(pod, used) {
		return predicate(ReasonNodePorts, descNodePorts)
	}
	if !podutil.IsStaticPod(pod) && untoleratedNoExecute(pod, node) {
		return predicate(ReasonTaintToleration, descTaintToleration)
	}
	return PodAdmitResult{Admit: true}
}

// shortage is a resource the node lacks for a pod (the kubelet's
// InsufficientResourceError).
type shortage struct {
	name                      v1.ResourceName
	requested, used, capacity int64
}

func (s shortage) result() PodAdmitResult {
	return PodAdmitResult{Reason: ReasonOutOfPrefix + string(s.name),
		Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", s.name, s.requested, s.used, s.capacity)}
}

// missing is how much of the resource must be freed for the pod to fit.
func (s shortage) missing() int64 { return s.requested - (s.capacity - s.used) }

// shortages is the scheduler's noderesources.Fits as the kubelet calls it:
// the resources short, in the order pods, cpu, memory, ephemeral-storage,
// then the others by name.
func shortages(pod *v1.Pod, used *Usage, allocatable v1.ResourceList) []shortage {
	var out []shortage
	if q, ok := allocatable[v1.ResourcePods]; ok && int64(used.Pods())+1 > q.Value() {
		out = append(out, shortage{v1.ResourcePods, 1, int64(used.Pods()), q.Value()})
	}
	names := requestedResources(pod)
	first := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage}
	slices.SortFunc(names, func(a, b v1.ResourceName) int {
		ia, ib := slices.Index(first, a), slices.Index(first, b)
		switch {
		case ia >= 0 && ib >= 0:
			return ia - ib
		case ia >= 0:
			return -1
		case ib >= 0:
			return 1
		}
		return cmp.Compare(a, b)
	})
	for _, name := range names {
		q, known := allocatable[name]
		if !known && podutil.IsExtendedResourceName(name) {
			continue // a cluster-level resource, unknown to nodes
		}
		requested := cm.PodRequest(pod, name)
		if requested <= 0 {
			continue
		}
		capacity := q.Value()
		if name == v1.ResourceCPU {
			capacity = q.MilliValue()
		}
		if u := used.Requested(name); requested > capacity-u {
			out = append(out, shortage{name, requested, u, capacity})
		}
	}
	return out
}

// requestedResources lists the resources any of the pod's containers, its
// pod-level resources or its overhead request, once each.
func requestedResources(pod *v1.Pod) []v1.ResourceName {
	var names []v1.ResourceName
	add := func(rl v1.ResourceList) {
		for name := range rl {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		add(pod.Spec.InitContainers[i].Resources.Requests)
	}
	for i := range pod.Spec.Containers {
		add(pod.Spec.Containers[i].Resources.Requests)
	}
	if pod.Spec.Resources != nil {
		add(pod.Spec.Resources.Requests)
	}
	add(pod.Spec.Overhead)
	return names
}

// matchesNodeAffinity is the scheduler's required node affinity as the
// kubelet checks it: spec.nodeSelector's labels, and any one of the
// required terms of spec.affinity.nodeAffinity.
func matchesNodeAffinity(pod *v1.Pod, node *v1.Node) bool {
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if matchesTerm(term, node) {
			return true
		}
	}
	return false
}

// matchesTerm reports whether every requirement of a term holds; a term
// without requirements matches no node, as the API defines.
func matchesTerm(term v1.NodeSelectorTerm, node *v1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, r := range term.MatchExpressions {
		v, ok := node.Labels[r.Key]
		if !matchesRequirement(r, v, ok) {
			return false
		}
	}
	for _, r := range term.MatchFields {
		// metadata.name is the only field the API allows.
		if r.Key != "metadata.name" || !matchesRequirement(r, node.Name, true) {
			return false
		}
	}
	return true
}

func matchesRequirement(r v1.NodeSelectorRequirement, value string, present bool) bool {
	switch r.Operator {
	case v1.NodeSelectorOpIn:
		return present && slices.Contains(r.Values, value)
	case v1.NodeSelectorOpNotIn:
		return !present || !slices.Contains(r.Values, value)
	case v1.NodeSelectorOpExists:
		return present
	case v1.NodeSelectorOpDoesNotExist:
		return !present
	case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
		if !present || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(value, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == v1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}

// hostPort is a host port a pod binds, its IP normalized: empty or
// unspecified is every address, 0.0.0.0.
type hostPort struct {
	ip    string
	proto v1.Protocol
	port  int32
}

// hostPorts are the host ports of a pod's containers and sidecars, the
// containers that run for the pod's whole life.
func hostPorts(pod *v1.Pod, out []hostPort) []hostPort {
	add := func(c *v1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			ip := p.HostIP
			if parsed := net.ParseIP(ip); ip == "" || (parsed != nil && parsed.IsUnspecified()) {
				ip = "0.0.0.0"
			}
			proto := p.Protocol
			if proto == "" {
				proto = v1.ProtocolTCP
			}
			out = append(out, hostPort{ip: ip, proto: proto, port: p.HostPort})
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; podutil.IsRestartableInitContainer(c) {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return out
}

// fitsHostPorts reports whether none of the pod's host ports is bound by
// another pod: the same protocol and port on the same address, or on every
// address on either side.
func fitsHostPorts(pod *v1.Pod, used *Usage) bool {
	want := hostPorts(pod, nil)
	if len(want) == 0 {
		return true
	}
	for _, w := range want {
		for _, u := range used.hostPorts() {
			if w.proto == u.proto && w.port == u.port && (w.ip == u.ip || w.ip == "0.0.0.0" || u.ip == "0.0.0.0") {
				return false
			}
		}
	}
	return true
}

// untoleratedNoExecute reports whether the node has a NoExecute taint the
// pod does not tolerate: the only effect the kubelet admits by.
func untoleratedNoExecute(pod *v1.Pod, node *v1.Node) bool {
	for i := range node.Spec.Taints {
		taint := &node.Spec.Taints[i]
		if taint.Effect != v1.TaintEffectNoExecute {
			continue
		}
		// Comparison operators (Lt, Gt) are alpha and off, as in the kubelet
		// by default: such a toleration tolerates nothing.
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(t v1.Toleration) bool { return t.ToleratesTaint(logr.Discard(), taint, false) }) {
			return true
		}
	}
	return false
}
