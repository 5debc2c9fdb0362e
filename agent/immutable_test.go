package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
	"github.com/nodekit/nodekit/runtime/fake"
)

// The pods a source sends are shared, not copied, from podconfig down to
// the runtime (podconfig.Options.CopyPods is off by default): nothing may
// modify them. This test runs pods with most of the spec a kubelet reads
// (init and sidecar containers, probes, env from fields and resources,
// volumes, resources) through start, an update, graceful deletion and
// removal, on runtime/fake and through runtime/cri to fakecri (which builds
// sandbox and container configs, environments and volumes from the pod).
// Every pod must end as it was sent, less the config.source and config.seen
// annotations podconfig adds on arrival; and under -race, a reader copying
// the pods all along makes any write to them a reported race.
func TestPodsAreNeverModified(t *testing.T) {
	for _, tc := range []struct {
		name    string
		runtime func(t *testing.T) runtime.Runtime
	}{
		{"runtime/fake", func(t *testing.T) runtime.Runtime {
			rt, err := fake.New(fake.Config{})
			require.NoError(t, err)
			rt.SetContainerBehavior("init", fake.Behavior{Exit: true})
			rt.SetContainerBehavior("once", fake.Behavior{Exit: true, ExitAfter: 20 * time.Millisecond})
			return rt
		}},
		{"runtime/cri on fakecri", func(t *testing.T) runtime.Runtime {
			srv, err := fakecri.NewServer(fakecri.Config{})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, srv.Close()) })
			srv.SetBehavior("init", fakecri.Behavior{ExitOnStart: true})
			srv.SetBehavior("once", fakecri.Behavior{ExitOnStart: true})
			rt, err := cri.New(context.Background(), cri.Config{Endpoint: srv.Endpoint(), PodLogsRoot: t.TempDir(), PodsRoot: t.TempDir()})
			require.NoError(t, err)
			t.Cleanup(func() { rt.Close() })
			return rt
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, fastConfig(tc.runtime(t)))
			var sent, want []*v1.Pod
			send := func(pods ...*v1.Pod) {
				for _, p := range pods {
					sent, want = append(sent, p), append(want, p.DeepCopy())
				}
				r.set(pods...)
			}
			// The reader copies the pods the agent has been given (podconfig
			// annotates a pod on arrival, before it hands it on).
			var given []*v1.Pod

			stop := make(chan struct{})
			var reader sync.WaitGroup
			var mu sync.Mutex // guards given, which the reader copies
			reader.Add(1)
			go func() {
				defer reader.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
					mu.Lock()
					pods := append([]*v1.Pod(nil), given...)
					mu.Unlock()
					for _, p := range pods {
						_ = p.DeepCopy()
					}
				}
			}()
			locked := func(f func()) { mu.Lock(); defer mu.Unlock(); f() }

			full, once := richPod("full"), newPod("once", v1.RestartPolicyNever, "once")
			send(full, once)
			waitFor(t, "the full pod running", func() bool { return r.phase(full.UID) == v1.PodRunning })
			waitFor(t, "the run-once pod started", func() bool {
				ph := r.phase(once.UID)
				return ph == v1.PodRunning || ph == v1.PodSucceeded
			})
			locked(func() { given = append(given, full, once) })

			changed := richPod("full")
			changed.Spec.Containers[0].Image = "img-app:2"
			send(changed, newPod("once", v1.RestartPolicyNever, "once"))
			waitFor(t, "the new image running", func() bool {
				p := r.pod(full.UID)
				if p == nil || p.Status.Phase != v1.PodRunning {
					return false
				}
				for _, s := range p.Status.ContainerStatuses {
					if s.Name == "app" && s.State.Running != nil && s.Image == "img-app:2" {
						return true
					}
				}
				return false
			})
			locked(func() { given = append(given, changed) })

			deleting := richPod("full")
			deleting.Spec.Containers[0].Image = "img-app:2"
			deleting.DeletionTimestamp = ptr.To(metav1.Now())
			deleting.DeletionGracePeriodSeconds = ptr.To[int64](1)
			send(deleting)
			waitFor(t, "the deleted pod's containers stopped", func() bool {
				p := r.pod(full.UID)
				if p == nil {
					return true
				}
				for _, s := range p.Status.ContainerStatuses {
					if s.State.Running != nil {
						return false
					}
				}
				return true
			})
			locked(func() { given = append(given, deleting) })
			r.set()
			waitFor(t, "every pod gone", func() bool { return len(r.a.Pods()) == 0 })
			r.stop()
			close(stop)
			reader.Wait()

			for i, p := range sent {
				got := p.DeepCopy()
				delete(got.Annotations, podutil.ConfigSourceAnnotationKey)
				delete(got.Annotations, podutil.ConfigFirstSeenAnnotationKey)
				if len(got.Annotations) == 0 && want[i].Annotations == nil {
					got.Annotations = nil
				}
				require.True(t, equality.Semantic.DeepEqual(want[i], got),
					"pod %d (%s) was modified:\nsent %+v\nnow  %+v", i, p.Name, want[i], got)
			}
		})
	}
}

// richPod is a pod with most of what the kubelet reads from a spec.
func richPod(name string) *v1.Pod {
	p := newPod(name, v1.RestartPolicyAlways)
	p.Labels = map[string]string{"app": name}
	p.Annotations = map[string]string{"example.com/note": "kept"}
	res := v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("128Mi")},
	}
	env := []v1.EnvVar{
		{Name: "LITERAL", Value: "x"},
		{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "CPU_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
		// A divisor made in code: its quantity's string cache is cold, and
		// encoding the pod would write it.
		{Name: "MEM_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory",
			Divisor: *resource.NewQuantity(1<<20, resource.BinarySI)}}},
		{Name: "EXPANDED", Value: "$(POD_NAME)-$(LITERAL)"},
	}
	mounts := []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: "info", MountPath: "/etc/podinfo"}}
	p.Spec.Volumes = []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: resource.NewQuantity(1<<30, resource.BinarySI)}}},
		{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "cpu", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: *resource.NewMilliQuantity(1, resource.DecimalSI)}},
		}}}},
	}
	p.Spec.InitContainers = []v1.Container{
		{Name: "init", Image: "img-init", Resources: res},
		{Name: "sidecar", Image: "img-sidecar", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways), Env: env, VolumeMounts: mounts},
	}
	p.Spec.Containers = []v1.Container{
		{Name: "app", Image: "img-app", Resources: res, Env: env, VolumeMounts: mounts,
			Ports:          []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
			ReadinessProbe: execProbe(1, "true"), LivenessProbe: execProbe(10, "true")},
		{Name: "helper", Image: "img-helper", Command: []string{"sleep"}, Args: []string{"$(LITERAL)"}, Env: env},
	}
	return p
}
