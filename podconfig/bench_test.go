package podconfig

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BenchPod returns a pod shaped like a typical workload pod from the
// apiserver: labels, an annotation, one container with env, a port,
// resources, a mount and a probe, a volume, two tolerations and a running
// status. image varies the spec.
func benchPod(i int, image string) *v1.Pod {
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

// minimalPod is the kubelet config tests' pod: one container, no
// resources, no status.
func minimalPod(i int, image string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i))},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, DNSPolicy: v1.DNSClusterFirst,
			Containers: []v1.Container{{Name: "ctr", Image: image, ImagePullPolicy: v1.PullIfNotPresent, TerminationMessagePolicy: v1.TerminationMessageReadFile}}},
	}
}

// shape selects the pods the benchmarks use: "workload" (benchPod) or
// "minimal" (minimalPod).
var shapes = []string{"workload", "minimal"}

func benchPods(n int, changed int, image string) []*v1.Pod {
	return shapedPods("workload", n, changed, image)
}

func shapedPods(shape string, n int, changed int, image string) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		img := "registry.example.com/web:1.0"
		if i == changed {
			img = image
		}
		if shape == "minimal" {
			pods[i] = minimalPod(i, img)
		} else {
			pods[i] = benchPod(i, img)
		}
	}
	return pods
}

var benchSizes = []int{100, 1000, 10000}

// BenchmarkSet measures a source's first SET of N pods through the mux: merge
// into empty storage and delivery of the ADD to the consumer.
// Building the incoming pods is excluded.
func BenchmarkSet(b *testing.B) {
	for _, shape := range shapes {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/N=%d", shape, n), func(b *testing.B) {
				b.ReportAllocs()
				var cpu time.Duration
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					ctx, cancel := context.WithCancel(context.Background())
					c, _ := NewPodConfig(Incremental, Options{})
					ch := c.Channel(ctx, "api")
					pods := shapedPods(shape, n, -1, "")
					runtime.GC() // collect the setup's garbage outside the timing
					b.StartTimer()
					c0 := cpuNow()
					ch <- PodUpdate{Op: SET, Pods: pods}
					if u := <-c.Updates(); u.Op != ADD || len(u.Pods) != n {
						b.Fatalf("got %v with %d pods", u.Op, len(u.Pods))
					}
					cpu += cpuNow() - c0
					b.StopTimer()
					cancel()
					b.StartTimer()
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkSetOneChanged measures a SET of N pods of which one changed its
// image since the previous SET: N fingerprints and one UPDATE delivered.
// Building the incoming pods is excluded.
func BenchmarkSetOneChanged(b *testing.B) {
	for _, shape := range shapes {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/N=%d", shape, n), func(b *testing.B) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				c, _ := NewPodConfig(Incremental, Options{})
				ch := c.Channel(ctx, "api")
				ch <- PodUpdate{Op: SET, Pods: shapedPods(shape, n, -1, "")}
				<-c.Updates()
				b.ReportAllocs()
				b.ResetTimer()
				var cpu time.Duration
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					pods := shapedPods(shape, n, n/2, fmt.Sprintf("registry.example.com/web:2.%d", i))
					runtime.GC()
					b.StartTimer()
					c0 := cpuNow()
					ch <- PodUpdate{Op: SET, Pods: pods}
					if u := <-c.Updates(); u.Op != UPDATE || len(u.Pods) != 1 {
						b.Fatalf("got %v with %d pods", u.Op, len(u.Pods))
					}
					cpu += cpuNow() - c0
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkUpdateOne measures one incremental UPDATE (the apiserver source's
// path for a watch event) with N pods stored.
func BenchmarkUpdateOne(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c, _ := NewPodConfig(Incremental, Options{})
			ch := c.Channel(ctx, "api")
			ch <- PodUpdate{Op: SET, Pods: benchPods(n, -1, "")}
			<-c.Updates()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				pod := benchPod(n/2, fmt.Sprintf("registry.example.com/web:2.%d", i))
				b.StartTimer()
				ch <- PodUpdate{Op: UPDATE, Pods: []*v1.Pod{pod}}
				if u := <-c.Updates(); u.Op != UPDATE || len(u.Pods) != 1 {
					b.Fatalf("got %v with %d pods", u.Op, len(u.Pods))
				}
			}
		})
	}
}
