package podutil_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/podutil"
)

func rl(cpu, mem string) v1.ResourceList {
	out := v1.ResourceList{}
	if cpu != "" {
		out[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		out[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return out
}

func ctr(req, lim v1.ResourceList) v1.Container {
	return v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

func TestQOSClass(t *testing.T) {
	tests := []struct {
		name       string
		containers []v1.Container
		init       []v1.Container
		status     v1.PodQOSClass
		want       v1.PodQOSClass
	}{
		{"no requests or limits is BestEffort", []v1.Container{ctr(nil, nil)}, nil, "", v1.PodQOSBestEffort},
		{"zero requests count as none", []v1.Container{ctr(rl("0", "0"), nil)}, nil, "", v1.PodQOSBestEffort},
		{"only other resources is BestEffort", []v1.Container{ctr(v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}, nil)}, nil, "", v1.PodQOSBestEffort},
		{"requests equal to cpu and memory limits is Guaranteed", []v1.Container{ctr(rl("1", "1Gi"), rl("1", "1Gi"))}, nil, "", v1.PodQOSGuaranteed},
		{"equal quantities in other units are Guaranteed", []v1.Container{ctr(rl("1000m", "1024Mi"), rl("1", "1Gi"))}, nil, "", v1.PodQOSGuaranteed},
		{"every container must be Guaranteed", []v1.Container{ctr(rl("1", "1Gi"), rl("1", "1Gi")), ctr(nil, nil)}, nil, "", v1.PodQOSBurstable},
		{"requests below limits is Burstable", []v1.Container{ctr(rl("500m", "1Gi"), rl("1", "1Gi"))}, nil, "", v1.PodQOSBurstable},
		{"a cpu limit alone is Burstable", []v1.Container{ctr(rl("1", ""), rl("1", ""))}, nil, "", v1.PodQOSBurstable},
		{"a request alone is Burstable", []v1.Container{ctr(rl("", "64Mi"), nil)}, nil, "", v1.PodQOSBurstable},
		{"an init container without limits makes a Guaranteed pod Burstable", []v1.Container{ctr(rl("1", "1Gi"), rl("1", "1Gi"))},
			[]v1.Container{ctr(rl("100m", ""), nil)}, "", v1.PodQOSBurstable},
		{"a Guaranteed init container and a BestEffort container are Burstable", []v1.Container{ctr(nil, nil)},
			[]v1.Container{ctr(rl("1", "1Gi"), rl("1", "1Gi"))}, "", v1.PodQOSBurstable},
		{"Guaranteed init and regular containers are Guaranteed", []v1.Container{ctr(rl("1", "1Gi"), rl("1", "1Gi"))},
			[]v1.Container{ctr(rl("2", "1Gi"), rl("2", "1Gi"))}, "", v1.PodQOSGuaranteed},
		{"status.qosClass set by the apiserver wins", []v1.Container{ctr(nil, nil)}, nil, v1.PodQOSBurstable, v1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: tt.containers, InitContainers: tt.init}, Status: v1.PodStatus{QOSClass: tt.status}}
			require.Equal(t, tt.want, podutil.QOSClass(pod))
		})
	}
}

func TestQOSClassWithPodLevelResources(t *testing.T) {
	guaranteed := []v1.Container{ctr(rl("1", "1Gi"), rl("1", "1Gi"))}
	tests := []struct {
		name       string
		req, lim   v1.ResourceList
		containers []v1.Container
		want       v1.PodQOSClass
	}{
		{"pod-level limits make a pod Guaranteed", rl("2", "1Gi"), rl("2", "1Gi"), []v1.Container{ctr(nil, nil), ctr(nil, nil)}, v1.PodQOSGuaranteed},
		{"pod-level limits make a pod Guaranteed whatever its containers request", rl("2", "1Gi"), rl("2", "1Gi"),
			[]v1.Container{ctr(rl("100m", ""), nil)}, v1.PodQOSGuaranteed},
		{"pod-level requests below limits are Burstable", rl("1", "1Gi"), rl("2", "1Gi"), guaranteed, v1.PodQOSBurstable},
		{"a pod-level cpu limit alone is Burstable", rl("1", ""), rl("1", ""), guaranteed, v1.PodQOSBurstable},
		{"pod-level limits without requests are Burstable", nil, rl("1", "1Gi"), guaranteed, v1.PodQOSBurstable},
		{"pod-level resources without cpu or memory are BestEffort", v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}, nil,
			guaranteed, v1.PodQOSBestEffort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: tt.containers, Resources: &v1.ResourceRequirements{Requests: tt.req, Limits: tt.lim}}}
			require.Equal(t, tt.want, podutil.QOSClass(pod))
		})
	}
	t.Run("container resources decide without pod-level resources", func(t *testing.T) {
		require.Equal(t, v1.PodQOSGuaranteed, podutil.QOSClass(&v1.Pod{Spec: v1.PodSpec{Containers: guaranteed}}))
	})
}
