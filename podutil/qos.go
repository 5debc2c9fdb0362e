package podutil

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// QOSClass is the pod's QoS class: status.qosClass when the apiserver set
// it, else ComputeQOSClass of its spec (static pods have no status yet).
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputeQOSClass(&pod.Spec)
}

// ComputeQOSClass computes the QoS class from the containers' cpu and
// memory requests and limits, as the apiserver does on creation
// (k8s.io/kubernetes pkg/apis/core/v1/helper/qos): BestEffort without any,
// Guaranteed when every container limits both and requests equal limits,
// Burstable otherwise.
func ComputeQOSClass(spec *v1.PodSpec) v1.PodQOSClass {
	requests := map[v1.ResourceName]*resource.Quantity{}
	limits := map[v1.ResourceName]*resource.Quantity{}
	guaranteed := true
	add := func(sum map[v1.ResourceName]*resource.Quantity, rl v1.ResourceList) (cpu, mem bool) {
		for _, name := range [...]v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			q, ok := rl[name]
			if !ok || q.Sign() <= 0 {
				continue
			}
			if cur := sum[name]; cur != nil {
				cur.Add(q)
			} else {
				c := q.DeepCopy()
				sum[name] = &c
			}
			if name == v1.ResourceCPU {
				cpu = true
			} else {
				mem = true
			}
		}
		return cpu, mem
	}
	visit := func(c *v1.Container) {
		add(requests, c.Resources.Requests)
		if cpu, mem := add(limits, c.Resources.Limits); !cpu || !mem {
			guaranteed = false
		}
	}
	for i := range spec.InitContainers {
		visit(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		visit(&spec.Containers[i])
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(*req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}
