package podutil

import (
	v1 "k8s.io/api/core/v1"
)

// QOSClass is the pod's QoS class: status.qosClass when the apiserver set
// it, else ComputeQOSClass of its spec (static pods have no status yet).
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputeQOSClass(&pod.Spec)
}

// ComputeQOSClass computes the QoS class from cpu and memory requests and
// limits, as the apiserver does on creation (k8s.io/kubernetes
// pkg/apis/core/v1/helper/qos ComputePodQOS, PodLevelResources on as it is
// by default since v1.34). When the pod has pod-level resources
// (spec.resources, KEP-2837) they alone decide; otherwise each container
// (init containers included) does, and the pod is BestEffort when every
// container is, Guaranteed when every container is, Burstable otherwise.
// A set of requests and limits is BestEffort without any cpu or memory,
// Guaranteed when it limits both and requests equal limits, Burstable
// otherwise.
func ComputeQOSClass(spec *v1.PodSpec) v1.PodQOSClass {
	if spec.Resources != nil {
		return requirementsQOS(spec.Resources)
	}
	var qos v1.PodQOSClass
	for _, cs := range [...][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			switch c := requirementsQOS(&cs[i].Resources); {
			case c == v1.PodQOSBurstable:
				return c
			case qos == "":
				qos = c
			case qos != c: // one BestEffort, another Guaranteed
				return v1.PodQOSBurstable
			}
		}
	}
	if qos == "" {
		return v1.PodQOSBestEffort
	}
	return qos
}

// requirementsQOS is the QoS class of one set of requests and limits (a
// container's, or the pod-level ones).
func requirementsQOS(r *v1.ResourceRequirements) v1.PodQOSClass {
	var qos v1.PodQOSClass
	for _, name := range [...]v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		req, lim := r.Requests[name], r.Limits[name]
		if req.Cmp(lim) != 0 {
			return v1.PodQOSBurstable // one of them is set
		}
		c := v1.PodQOSGuaranteed
		if req.IsZero() {
			c = v1.PodQOSBestEffort
		}
		if qos != "" && qos != c {
			return v1.PodQOSBurstable // one resource limited, the other not
		}
		qos = c
	}
	return qos
}
