package agent

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/runtime/fake"
)

// TestPodFilterKeepsPodsFromTheAgent: a pod of the PodSource that
// PodFilter refuses never reaches the agent (virtual-kubelet's
// PodEventFilterFunc); one it passes runs.
func TestPodFilterKeepsPodsFromTheAgent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filter func(*v1.Pod) bool
		want   []string
	}{
		{"no filter: every pod bound to the node", nil, []string{"vk", "other"}},
		{"a filter on the scheduler's name", func(p *v1.Pod) bool { return p.Spec.SchedulerName == "vk-scheduler" }, []string{"vk"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vk, other := newPod("vk", v1.RestartPolicyAlways, "c"), newPod("other", v1.RestartPolicyAlways, "c")
			vk.Spec.SchedulerName = "vk-scheduler"
			client := podconfigtest.NewPodClient(0)
			client.SetList(&v1.PodList{Items: []v1.Pod{*vk, *other}})
			client.AddWatcher(watch.NewFake())
			rt, _ := fake.New(fake.Config{})
			c := fastConfig(rt)
			c.PodSource, c.PodFilter, c.Sources = client, tc.filter, nil
			r := start(t, c)
			for _, name := range tc.want {
				waitFor(t, name+" running", func() bool { return r.phase(k8stypes.UID("uid-"+name)) == v1.PodRunning })
			}
			time.Sleep(100 * time.Millisecond) // several relists and syncs
			if got := len(r.a.Pods()); got != len(tc.want) {
				t.Fatalf("the agent has %d pods, want %v", got, tc.want)
			}
		})
	}
}
