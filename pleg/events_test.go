package pleg

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodekit/nodekit/runtime"
)

func TestContainerTransitions(t *testing.T) {
	const gone = runtime.ContainerState("") // not listed
	for _, tc := range []struct {
		name     string
		from, to runtime.ContainerState
		want     []PodLifecycleEventType
	}{
		{"new running container is started", gone, cRunning, []PodLifecycleEventType{ContainerStarted}},
		{"new exited container died", gone, cExited, []PodLifecycleEventType{ContainerDied}},
		{"new created container is only changed", gone, cCreated, []PodLifecycleEventType{containerChanged}},
		{"created container that starts is started", cCreated, cRunning, []PodLifecycleEventType{ContainerStarted}},
		{"running container that exits died", cRunning, cExited, []PodLifecycleEventType{ContainerDied}},
		{"running container that vanishes died and was removed", cRunning, gone, []PodLifecycleEventType{ContainerDied, ContainerRemoved}},
		{"unknown container that vanishes died and was removed", cUnknown, gone, []PodLifecycleEventType{ContainerDied, ContainerRemoved}},
		{"exited container that vanishes was only removed", cExited, gone, []PodLifecycleEventType{ContainerRemoved}},
		{"running container turning unknown is only changed", cRunning, cUnknown, []PodLifecycleEventType{containerChanged}},
		{"created and unknown are the same state", cCreated, cUnknown, nil},
		{"unchanged running container sends nothing", cRunning, cRunning, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var old podRecord
			var cur *runtime.Pod
			if tc.from != gone {
				old.remember(pod("p", ctr("c", tc.from)), nil)
			}
			if tc.to != gone {
				cur = pod("p", ctr("c", tc.to))
			}
			var got []PodLifecycleEventType
			for _, e := range appendEvents(nil, "p", &old, cur) {
				assert.Equal(t, cid("c").String(), e.ContainerID)
				assert.Equal(t, "p", string(e.ID))
				got = append(got, e.Type)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestContainerListedTwiceGetsOneSetOfEvents(t *testing.T) {
	cur := pod("p", ctr("c", cRunning), ctr("c", cRunning))
	cur.Sandboxes = []*runtime.Container{ctr("c", cRunning)}
	var rec podRecord
	assert.Equal(t, []PodLifecycleEvent{ev("p", ContainerStarted, "c")}, appendEvents(nil, "p", &rec, cur))
	rec.remember(cur, nil)
	assert.Equal(t, []PodLifecycleEvent{ev("p", ContainerDied, "c"), ev("p", ContainerRemoved, "c")}, appendEvents(nil, "p", &rec, nil))
}

func TestPodListedTwiceIsDiffedOnce(t *testing.T) {
	tp := newTestPLEG(t, nil)
	tp.lister.setPods(pod("p", ctr("a", cRunning)), pod("p", ctr("b", cRunning)))
	tp.relist(t)
	assert.Equal(t, events(ev("p", ContainerStarted, "a")), drain(tp.Watch()), "the first listing wins")
	tp.lister.setPods(pod("p", ctr("a", cRunning)))
	tp.relist(t)
	assert.Empty(t, drain(tp.Watch()))
}
