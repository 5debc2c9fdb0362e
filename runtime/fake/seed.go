package fake

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
)

// AddRunningPod puts pod on the runtime as if it had been synced to the end:
// a ready sandbox, its regular init containers exited 0, its sidecars and
// containers running and its images present. Programmed behaviours apply to
// the containers from now. No call is recorded. It replaces whatever the
// runtime held for the pod's UID. It is meant for tests and benchmarks that
// need many pods cheaply.
func (r *Runtime) AddRunningPod(pod *v1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addRunningPod(pod)
}

func (r *Runtime) addRunningPod(pod *v1.Pod) {
	if p, ok := r.pods[pod.UID]; ok {
		r.removePod(p)
	}
	p := r.pod(pod.UID, pod.Name, pod.Namespace)
	now := r.clock.Now()
	n := r.newID()
	s := &sandbox{id: "sandbox" + strconv.FormatUint(n, 10), state: runtime.SandboxStateReady, createdAt: now, hostNetwork: pod.Spec.HostNetwork}
	if !pod.Spec.HostNetwork {
		s.ips = []string{r.sandboxIP(n)}
	}
	p.sandboxes = append(p.sandboxes, s)
	add := func(c *v1.Container, kind containerKind) {
		id := r.images[c.Image]
		if id == "" {
			id = imageID(c.Image)
			r.images[c.Image] = id
		}
		b := r.behavior(pod, c.Name, c.Image)
		ctr := &container{
			id:   runtime.ContainerID{Type: r.typ, ID: "c" + strconv.FormatUint(r.newID(), 10)},
			name: c.Name, image: c.Image, imageID: id, hash: runtime.HashContainer(c),
			sandboxID: s.id, kind: kind, state: runtime.ContainerStateRunning,
			createdAt: now, startedAt: now, ignoreTERM: b.IgnoreTERM, termExitCode: b.TermExitCode, readyAt: now.Add(b.ReadyAfter),
			ports: tcpPorts(c), usage: usageState{u: b.Usage, since: now},
		}
		if kind == kindInit {
			ctr.exit(now, 0, "")
		} else if b.Exit {
			ctr.exitAt, ctr.exitWith = now.Add(b.ExitAfter), b.ExitCode
		}
		p.containers = append(p.containers, ctr)
	}
	for i := range pod.Spec.InitContainers {
		add(&pod.Spec.InitContainers[i], kindOf(&pod.Spec.InitContainers[i], true))
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i], kindRegular)
	}
}

// AddRunningPods seeds the runtime for benchmarks and load tests: it adds
// n generated pods, each with containersPerPod running
// containers, as AddRunningPod does, and returns their specs (named
// "pod-<k>" in namespace "default", UID "uid-<k>", containers "c0", "c1",
// ..., image "fake.local/app:1", restart policy Always).
func (r *Runtime) AddRunningPods(n, containersPerPod int) []*v1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	pods := make([]*v1.Pod, n)
	for i := range pods {
		k := strconv.FormatUint(r.newID(), 10)
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "pod-"+k, "default", types.UID("uid-"+k)
		pod.Spec.RestartPolicy = v1.RestartPolicyAlways
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
		pod.Spec.Containers = make([]v1.Container, containersPerPod)
		for j := range pod.Spec.Containers {
			pod.Spec.Containers[j] = v1.Container{Name: "c" + strconv.Itoa(j), Image: "fake.local/app:1", ImagePullPolicy: v1.PullIfNotPresent}
		}
		r.addRunningPod(pod)
		pods[i] = pod
	}
	return pods
}
