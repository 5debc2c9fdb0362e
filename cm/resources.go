package cm

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/podutil"
)

// The kernel's and the kubelet's CPU constants.
const (
	MinShares     = 2
	MaxShares     = 262144
	sharesPerCPU  = 1024
	minQuotaUsec  = 1000
	defaultPeriod = 100000 // µs, the CFS default
)

// Resources are the limits written to a cgroup; nil fields are left
// alone (no limit).
type Resources struct {
	CPUShares *uint64 // cgroup v1 cpu.shares; v2 gets cpu.weight from it
	CPUQuota  *int64  // µs per CPUPeriod, -1 for none
	CPUPeriod *uint64 // µs
	Memory    *int64  // bytes
	PidsLimit *int64  // -1 for none
}

// MilliCPUToShares turns a cpu request into cpu.shares, as the kubelet.
func MilliCPUToShares(milli int64) uint64 {
	if milli == 0 {
		return MinShares
	}
	s := milli * sharesPerCPU / 1000
	switch {
	case s < MinShares:
		return MinShares
	case s > MaxShares:
		return MaxShares
	}
	return uint64(s)
}

// MilliCPUToQuota turns a cpu limit into a CFS quota for period (µs); 0
// for no limit.
func MilliCPUToQuota(milli int64, period int64) int64 {
	if milli == 0 {
		return 0
	}
	q := milli * period / 1000
	if q < minQuotaUsec {
		q = minQuotaUsec
	}
	return q
}

// SharesToWeight maps cpu.shares [2, 262144] onto cgroup v2's cpu.weight
// [1, 10000], as runc and the kubelet do.
func SharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	return 1 + ((shares-2)*9999)/262142
}

// PodRequest is what the pod requests of a resource, as the kubelet's
// PodRequests (see podTotals); cpu in millicores, others in their unit.
func PodRequest(pod *v1.Pod, name v1.ResourceName) int64 {
	total, _ := podTotals(pod, name, false)
	return total
}

// podTotals is a resource's pod-wide amount as the kubelet's PodRequests
// and PodLimits (k8s.io/component-helpers/resource, pod-level resources
// on) compute it: a pod-level value (spec.resources, KEP-2837) for cpu or
// memory wins; otherwise the containers' sum as the scheduler's: the
// larger of the regular containers (plus sidecars) and any init container
// (plus the sidecars started before it). The pod overhead is added to
// requests, and to limits that are set.
//
// declared reports whether the limit bounds the pod cgroup, as
// ResourceConfigForPod's cpu/memoryLimitsDeclared: every container sets a
// positive amount, or the pod-level limit is positive.
func podTotals(pod *v1.Pod, name v1.ResourceName, limits bool) (total int64, declared bool) {
	value := func(rl v1.ResourceList) int64 {
		q, ok := rl[name]
		if !ok {
			return 0
		}
		if name == v1.ResourceCPU {
			return q.MilliValue()
		}
		return q.Value()
	}
	get := func(c *v1.Container) int64 {
		if limits {
			return value(c.Resources.Limits)
		}
		return value(c.Resources.Requests)
	}
	declared = true
	var sidecars, initMax int64
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		v := get(c)
		if v <= 0 {
			declared = false
		}
		if podutil.IsRestartableInitContainer(c) {
			sidecars += v
			initMax = max(initMax, sidecars)
			continue
		}
		initMax = max(initMax, sidecars+v)
	}
	var sum int64
	for i := range pod.Spec.Containers {
		v := get(&pod.Spec.Containers[i])
		if v <= 0 {
			declared = false
		}
		sum += v
	}
	total = max(sum+sidecars, initMax)
	if r := pod.Spec.Resources; r != nil {
		level := r.Requests
		if limits {
			level = r.Limits
		}
		if _, ok := level[name]; ok {
			total = value(level)
			if limits && total > 0 {
				declared = true
			}
		}
	}
	if pod.Spec.Overhead != nil && (!limits || total != 0) {
		total += value(pod.Spec.Overhead)
	}
	return total, declared
}

// PodResources is the pod cgroup's configuration, as the kubelet's
// ResourceConfigForPod with CFS quota enforced and pod-level resources on:
// Guaranteed pods get cpu shares, quota and a memory limit; Burstable pods
// shares, and quota or a memory limit when that limit is declared (set by
// every container, or at the pod level); BestEffort pods the minimal
// shares. Shares come from the pod's cpu request, quota and memory limit
// from its limits, each the pod-level value where spec.resources sets one
// and the containers' total otherwise (podTotals). pidsLimit (if positive)
// applies to all.
func PodResources(pod *v1.Pod, period uint64, pidsLimit int64) Resources {
	cpuReq, _ := podTotals(pod, v1.ResourceCPU, false)
	cpuLim, cpuDeclared := podTotals(pod, v1.ResourceCPU, true)
	memLim, memDeclared := podTotals(pod, v1.ResourceMemory, true)
	shares := MilliCPUToShares(cpuReq)
	quota := MilliCPUToQuota(cpuLim, int64(period))
	var r Resources
	switch podutil.QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		r.CPUShares, r.CPUQuota, r.CPUPeriod, r.Memory = &shares, &quota, &period, &memLim
	case v1.PodQOSBurstable:
		r.CPUShares = &shares
		if cpuDeclared {
			r.CPUQuota, r.CPUPeriod = &quota, &period
		}
		if memDeclared {
			r.Memory = &memLim
		}
	default:
		s := uint64(MinShares)
		r.CPUShares = &s
	}
	if pidsLimit > 0 {
		r.PidsLimit = &pidsLimit
	}
	return r
}

// Allocatable is capacity minus the reservations, per resource in
// capacity, never below zero: the kubelet's node allocatable (capacity -
// system-reserved - kube-reserved - hard eviction thresholds).
func Allocatable(capacity v1.ResourceList, reserved ...v1.ResourceList) v1.ResourceList {
	out := make(v1.ResourceList, len(capacity))
	for name, c := range capacity {
		a := c.DeepCopy()
		for _, r := range reserved {
			if q, ok := r[name]; ok {
				a.Sub(q)
			}
		}
		if a.Sign() < 0 {
			a = *resource.NewQuantity(0, c.Format)
		}
		out[name] = a
	}
	return out
}
