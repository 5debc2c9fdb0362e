package podconfigtest

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// WorkloadPod returns pod i ("pod-i", UID "uid-i", namespace default) shaped
// like a typical workload pod from the apiserver: labels, an annotation, one
// container with env, a port, resources, a mount and a probe, a volume, two
// tolerations and a running status. image varies the spec. It is the input
// of podconfig's benchmarks and of the bench module's comparison with the
// kubelet, so both measure the same pods.
func WorkloadPod(i int, image string) *v1.Pod {
	ts := metav1.Unix(1700000000, 0)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("pod-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i)),
			ResourceVersion: "12345", CreationTimestamp: ts,
			Labels:      map[string]string{"app": "web", "pod-template-hash": "5d8f7c9b6"},
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"},
		},
		Spec: v1.PodSpec{
			NodeName: "node-1", RestartPolicy: v1.RestartPolicyAlways, DNSPolicy: v1.DNSClusterFirst,
			SchedulerName: "default-scheduler", ServiceAccountName: "default",
			Containers: []v1.Container{{
				Name: "web", Image: image, Command: []string{"/bin/server"}, Args: []string{"--port=8080", "--verbose"},
				Env:   []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}, {Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
				Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("256Mi")},
				},
				VolumeMounts:           []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
				ReadinessProbe:         &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Scheme: v1.URISchemeHTTP}}, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile, ImagePullPolicy: v1.PullIfNotPresent,
			}},
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
			Tolerations: []v1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
				{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
			},
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, PodIP: "10.0.0.1", PodIPs: []v1.PodIP{{IP: "10.0.0.1"}}, HostIP: "192.168.0.1", StartTime: &ts,
			Conditions: []v1.PodCondition{
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: ts},
				{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: ts},
				{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: ts},
				{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: ts},
			},
			ContainerStatuses: []v1.ContainerStatus{{Name: "web", Ready: true, Image: image, ImageID: "sha256:abc", ContainerID: "containerd://abc",
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: ts}}}},
		},
	}
}
