package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestEffectiveGracePeriod(t *testing.T) {
	pod := func(spec, deletion *int64) *v1.Pod {
		p := &v1.Pod{}
		p.Spec.TerminationGracePeriodSeconds = spec
		p.DeletionGracePeriodSeconds = deletion
		return p
	}
	tests := []struct {
		name     string
		pod      *v1.Pod
		override *int64
		want     int64
	}{
		{"nil pod without override gets the default", nil, nil, 30},
		{"nil pod with override gets the override", nil, ptr.To[int64](5), 5},
		{"pod without any period gets the default", pod(nil, nil), nil, 30},
		{"spec period is used", pod(ptr.To[int64](10), nil), nil, 10},
		{"deletion period beats the spec", pod(ptr.To[int64](10), ptr.To[int64](3)), nil, 3},
		{"override beats deletion and spec", pod(ptr.To[int64](10), ptr.To[int64](3)), ptr.To[int64](7), 7},
		{"zero override is raised to one second", pod(ptr.To[int64](10), nil), ptr.To[int64](0), 1},
		{"zero spec is raised to one second", pod(ptr.To[int64](0), nil), nil, 1},
		{"negative deletion period is raised to one second", pod(nil, ptr.To[int64](-5)), nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, EffectiveGracePeriod(tt.pod, tt.override))
		})
	}
}

func TestHashContainer(t *testing.T) {
	c := &v1.Container{Name: "app", Image: "nginx:1"}
	h := HashContainer(c)
	assert.Equal(t, h, HashContainer(c.DeepCopy()), "equal specs hash equal")

	img := c.DeepCopy()
	img.Image = "nginx:2"
	assert.NotEqual(t, h, HashContainer(img), "an image change changes the hash")

	res := c.DeepCopy()
	res.Resources.Limits = v1.ResourceList{v1.ResourceCPU: mustQuantity("2")}
	assert.Equal(t, h, HashContainer(res), "resources can change in place and do not change the hash")
}

func TestPodStatusHelpers(t *testing.T) {
	s := &PodStatus{
		ContainerStatuses: []*ContainerStatus{
			{Name: "app", State: ContainerStateRunning, RestartCount: 1},
			{Name: "app", State: ContainerStateExited},
			{Name: "side", State: ContainerStateExited},
		},
		SandboxStatuses: []*SandboxStatus{{ID: "new", State: SandboxStateReady}, {ID: "old", State: SandboxStateNotReady}},
	}
	assert.Equal(t, 1, s.FindContainerStatusByName("app").RestartCount, "the newest instance is found")
	assert.Nil(t, s.FindContainerStatusByName("none"))
	assert.Len(t, s.RunningContainerStatuses(), 1)
	assert.Equal(t, "new", s.ReadySandbox().ID)
	s.SandboxStatuses[0].State = SandboxStateNotReady
	assert.Nil(t, s.ReadySandbox(), "only the newest sandbox counts")

	var rs *RuntimeStatus
	assert.False(t, rs.Ready(), "nil status is not ready")
	rs = &RuntimeStatus{Conditions: []RuntimeCondition{{Type: RuntimeReady, Status: true}}}
	assert.False(t, rs.Ready(), "a missing network condition is not ready")
	rs.Conditions = append(rs.Conditions, RuntimeCondition{Type: NetworkReady, Status: true})
	assert.True(t, rs.Ready())
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func TestPodHelpers(t *testing.T) {
	app := &Container{ID: ContainerID{Type: "fake", ID: "1"}, Name: "app"}
	p := &Pod{}
	assert.True(t, p.IsEmpty())
	p.Sandboxes = []*Container{{ID: ContainerID{Type: "fake", ID: "s"}}}
	assert.False(t, p.IsEmpty(), "a sandbox alone makes the pod non-empty")
	assert.Nil(t, p.FindContainerByID(ContainerID{Type: "fake", ID: "s"}), "sandboxes are not containers")
	p.Containers = []*Container{app}
	assert.Same(t, app, p.FindContainerByName("app"))
	assert.Nil(t, p.FindContainerByName("other"))
	assert.Same(t, app, p.FindContainerByID(ContainerID{Type: "fake", ID: "1"}))
}

func TestRunningPodHoldsWhatKillPodMustStop(t *testing.T) {
	id := func(s string) ContainerID { return ContainerID{Type: "cri", ID: s} }
	s := &PodStatus{
		ID: "uid", Name: "web", Namespace: "ns",
		ContainerStatuses: []*ContainerStatus{
			{ID: id("run"), Name: "app", State: ContainerStateRunning, Image: "img:1", ImageID: "sha", Hash: 7},
			{ID: id("old"), Name: "app", State: ContainerStateExited},
			{ID: id("new"), Name: "init", State: ContainerStateCreated},
			{ID: id("lost"), Name: "side", State: ContainerStateUnknown},
		},
		SandboxStatuses: []*SandboxStatus{{ID: "sb2", State: SandboxStateReady}, {ID: "sb1", State: SandboxStateNotReady}},
	}
	want := Pod{
		ID: "uid", Name: "web", Namespace: "ns",
		Containers: []*Container{
			{ID: id("run"), Name: "app", State: ContainerStateRunning, Image: "img:1", ImageID: "sha", Hash: 7},
			{ID: id("new"), Name: "init", State: ContainerStateCreated},
			{ID: id("lost"), Name: "side", State: ContainerStateUnknown},
		},
		Sandboxes: []*Container{
			{ID: ContainerID{Type: "containerd", ID: "sb2"}, State: ContainerStateRunning},
			{ID: ContainerID{Type: "containerd", ID: "sb1"}, State: ContainerStateExited},
		},
	}
	assert.Equal(t, want, s.RunningPod("containerd"), "exited containers are left out; every sandbox is kept")
	assert.Equal(t, Pod{ID: "uid"}, (&PodStatus{ID: "uid"}).RunningPod("x"), "a pod the runtime does not know has nothing to stop")
}
