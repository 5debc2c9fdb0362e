package sim_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/sim"
)

// An hour of a node running a web server and a crash-looping pod, on
// virtual time.
func Example() {
	ctx := context.Background()
	cl, err := sim.New(sim.Config{Seed: 1})
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	if _, err := cl.AddNode("node-a"); err != nil {
		panic(err)
	}
	// The store keys a pod's UID by the seed, its namespace and name (the
	// kubelet's BackOff message names it), so the order of creation does
	// not matter.
	for _, p := range []struct{ name, script string }{{"web", ""}, {"crash", "10s:1"}} {
		name, script := p.name, p.script
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "app:1"}}},
		}
		if script != "" {
			pod.Annotations = map[string]string{sim.ExitAnnotation: script}
		}
		if _, err := cl.CreatePod(ctx, pod); err != nil {
			panic(err)
		}
	}
	start := cl.Clock().Now()
	if err := cl.RunFor(ctx, time.Hour); err != nil {
		panic(err)
	}
	for _, p := range cl.ListPods() {
		cs := p.Status.ContainerStatuses[0]
		fmt.Println(p.Name, p.Spec.NodeName, p.Status.Phase, "restarts:", cs.RestartCount)
	}
	// The crash pod's log from its first exit (restarted at once) through
	// its first back-off (10s, waiting from the exit it holds back).
	for _, e := range cl.Events() {
		if e.Object == "default/crash" && e.Time.Sub(start) >= 10*time.Second && e.Time.Sub(start) <= 31*time.Second {
			fmt.Println(e)
		}
	}
	// Output:
	// crash node-a Running restarts: 16
	// web node-a Running restarts: 0
	// 00:00:10 Pod default/crash event Normal Created (node-a, spec.containers{app}): Created container: app
	// 00:00:10 Pod default/crash event Normal Pulled (node-a, spec.containers{app}): Container image "app:1" already present on machine
	// 00:00:10 Pod default/crash event Normal Started (node-a, spec.containers{app}): Started container app
	// 00:00:10 Pod default/crash ready False
	// 00:00:10 Pod default/crash app terminated Error (1)
	// 00:00:11 Pod default/crash ready True
	// 00:00:11 Pod default/crash app restarts 1
	// 00:00:11 Pod default/crash app running
	// 00:00:20 Pod default/crash event Warning BackOff (node-a, spec.containers{app}): Back-off restarting failed container app in pod crash_default(5fc2983a-f893-4c6f-b2b1-1cffb671fc7f)
	// 00:00:20 Pod default/crash ready False
	// 00:00:20 Pod default/crash app waiting CrashLoopBackOff
	// 00:00:30 Pod default/crash event Normal Created (node-a, spec.containers{app}): Created container: app
	// 00:00:30 Pod default/crash event Normal Pulled (node-a, spec.containers{app}): Container image "app:1" already present on machine
	// 00:00:30 Pod default/crash event Normal Started (node-a, spec.containers{app}): Started container app
	// 00:00:31 Pod default/crash ready True
	// 00:00:31 Pod default/crash app restarts 2
	// 00:00:31 Pod default/crash app running
}
