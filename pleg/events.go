package pleg

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// plegState is a container state as the PLEG tells them apart: created and
// unknown are one state, and a container that is not listed is nonExistent.
type plegState uint8

const (
	nonExistent plegState = iota
	running
	exited
	unknown
)

func stateOf(s runtime.ContainerState) plegState {
	switch s {
	case runtime.ContainerStateRunning:
		return running
	case runtime.ContainerStateExited:
		return exited
	default: // created, unknown, or a state this package does not know
		return unknown
	}
}

// samePod reports whether two listings of a pod have the same containers and
// sandboxes in the same order and states, the common case of a relist; it
// lets a steady relist skip the event computation. A nil pod has none.
func samePod(a, b *runtime.Pod) bool {
	var ac, as, bc, bs []*runtime.Container
	if a != nil {
		ac, as = a.Containers, a.Sandboxes
	}
	if b != nil {
		bc, bs = b.Containers, b.Sandboxes
	}
	return sameContainers(ac, bc) && sameContainers(as, bs)
}

func sameContainers(a, b []*runtime.Container) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].State != b[i].State {
			return false
		}
	}
	return true
}

// find returns the state of container id in pod, containers before
// sandboxes.
func find(pod *runtime.Pod, id runtime.ContainerID) plegState {
	if pod == nil {
		return nonExistent
	}
	for _, c := range pod.Containers {
		if c.ID == id {
			return stateOf(c.State)
		}
	}
	for _, c := range pod.Sandboxes {
		if c.ID == id {
			return stateOf(c.State)
		}
	}
	return nonExistent
}

// seenBefore reports whether id occurs in pod's containers and sandboxes
// before the position (list, i); list 0 is Containers, 1 Sandboxes. A runtime
// should not list an ID twice, but if it does the ID gets one set of events.
func seenBefore(pod *runtime.Pod, list, i int, id runtime.ContainerID) bool {
	cs := pod.Containers
	if list == 1 {
		for _, c := range cs {
			if c.ID == id {
				return true
			}
		}
		cs = pod.Sandboxes
	}
	for _, c := range cs[:i] {
		if c.ID == id {
			return true
		}
	}
	return false
}

// appendEvents appends to buf the events that take pod pid from old to cur,
// over the union of their containers and sandboxes. Either may be nil.
func appendEvents(buf []PodLifecycleEvent, pid types.UID, old, cur *runtime.Pod) []PodLifecycleEvent {
	if cur != nil {
		for list, cs := range [2][]*runtime.Container{cur.Containers, cur.Sandboxes} {
			for i, c := range cs {
				if seenBefore(cur, list, i, c.ID) {
					continue
				}
				buf = appendTransition(buf, pid, c.ID, find(old, c.ID), stateOf(c.State))
			}
		}
	}
	if old != nil {
		for list, cs := range [2][]*runtime.Container{old.Containers, old.Sandboxes} {
			for i, c := range cs {
				if find(cur, c.ID) != nonExistent || seenBefore(old, list, i, c.ID) {
					continue
				}
				buf = appendTransition(buf, pid, c.ID, stateOf(c.State), nonExistent)
			}
		}
	}
	return buf
}

// appendTransition appends the events of one container moving from one state
// to another: to running, ContainerStarted; to exited, ContainerDied; to
// created or unknown, ContainerChanged; gone, ContainerRemoved, preceded by
// ContainerDied unless its death was reported already.
func appendTransition(buf []PodLifecycleEvent, pid types.UID, id runtime.ContainerID, from, to plegState) []PodLifecycleEvent {
	if from == to {
		return buf
	}
	ev := PodLifecycleEvent{ID: pid, ContainerID: id.String()}
	switch to {
	case running:
		ev.Type = ContainerStarted
	case exited:
		ev.Type = ContainerDied
	case unknown:
		ev.Type = ContainerChanged
	case nonExistent:
		if from != exited {
			died := ev
			died.Type = ContainerDied
			buf = append(buf, died)
		}
		ev.Type = ContainerRemoved
	}
	return append(buf, ev)
}
