package admission

import (
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/cm"
)

// Usage is what a set of pods takes of a node, as the scheduler's NodeInfo
// sums it for the kubelet's admission: how many they are, what they request
// of each resource (PodRequests semantics) and the host ports they bind.
//
// A caller that admits pods one after another, as the agent does with a
// batch of additions, keeps one Usage of OtherPods in
// PodAdmitAttributes.OtherPodsUsage and adds each pod it admits: each
// admission then costs the pod's own size. Without it GeneralPredicates sums
// OtherPods for every pod, which is quadratic in a batch (10,000 pods at
// once on a virtual node). The sums are taken on first use, so a Usage that
// no handler reads costs nothing.
//
// A Usage is not safe for concurrent use.
type Usage struct {
	list     func() []*v1.Pod // NewUsageOf's pods, listed on first read
	pending  []*v1.Pod        // added, not summed yet
	pods     int
	requests map[v1.ResourceName]int64 // cpu in millicores
	ports    []hostPort
}

// NewUsage returns the usage of pods. It keeps the slice (not its later
// appends) until first read: pods must not change meanwhile.
func NewUsage(pods []*v1.Pod) *Usage {
	return &Usage{pending: slices.Clip(pods)}
}

// NewUsageOf returns the usage of the pods list returns, which it calls
// once, on first read (before which Add is summed after them): a caller
// whose handlers seldom read the usage (GeneralPredicatesWithoutResources
// reads it only for a pod with host ports) lists the node's pods only
// then, not for every pod.
func NewUsageOf(list func() []*v1.Pod) *Usage {
	return &Usage{list: list}
}

// Add adds pod, admitted to the node.
func (u *Usage) Add(pod *v1.Pod) {
	if u.requests == nil {
		u.pending = append(u.pending, pod)
		return
	}
	u.add(pod)
}

func (u *Usage) add(pod *v1.Pod) {
	u.pods++
	for _, name := range requestedResources(pod) {
		if r := cm.PodRequest(pod, name); r > 0 {
			u.requests[name] += r
		}
	}
	u.ports = hostPorts(pod, u.ports)
}

func (u *Usage) sum() {
	if u.requests != nil {
		return
	}
	u.requests = map[v1.ResourceName]int64{}
	if u.list != nil {
		for _, pod := range u.list() {
			u.add(pod)
		}
		u.list = nil
	}
	for _, pod := range u.pending {
		u.add(pod)
	}
	u.pending = nil
}

// Pods is the number of pods.
func (u *Usage) Pods() int {
	u.sum()
	return u.pods
}

// Requested is what the pods request of a resource, cpu in millicores.
func (u *Usage) Requested(name v1.ResourceName) int64 {
	u.sum()
	return u.requests[name]
}

// hostPorts are the host ports the pods bind.
func (u *Usage) hostPorts() []hostPort {
	u.sum()
	return u.ports
}
