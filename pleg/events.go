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

// podRecord is what the PLEG remembers of one pod between relists.
type podRecord struct {
	uid types.UID
	// old holds the IDs and states of the pod's containers, then its
	// sandboxes, as of the last relist that acted on the pod; nContainers
	// splits the two. It is a copy, so that the PLEG keeps neither the
	// runtime's objects (which may share memory with a whole listing) nor
	// their fields it does not need.
	old         []ctrState
	nContainers int
	// known is false until the pod was acted on once.
	known bool
	// seen is the generation of the last relist that listed the pod.
	seen uint64
}

type ctrState struct {
	id    runtime.ContainerID
	state plegState
}

// remember records pod as the listing last acted on, in dst's storage if
// it has room.
func (r *podRecord) remember(pod *runtime.Pod, dst []ctrState) {
	dst = dst[:0]
	for _, c := range pod.Containers {
		dst = append(dst, ctrState{c.ID, stateOf(c.State)})
	}
	for _, c := range pod.Sandboxes {
		dst = append(dst, ctrState{c.ID, stateOf(c.State)})
	}
	r.old, r.nContainers, r.known = dst, len(pod.Containers), true
}

// same reports whether pod lists the same containers and sandboxes in the
// same order and (PLEG) states as last time, the common case of a relist; it lets a
// steady relist skip the event computation. A nil pod has none.
func (r *podRecord) same(pod *runtime.Pod) bool {
	var cs, ss []*runtime.Container
	if pod != nil {
		cs, ss = pod.Containers, pod.Sandboxes
	}
	if len(cs) != r.nContainers || len(cs)+len(ss) != len(r.old) {
		return false
	}
	for i, c := range cs {
		if o := r.old[i]; o.id != c.ID || o.state != stateOf(c.State) {
			return false
		}
	}
	for i, c := range ss {
		if o := r.old[r.nContainers+i]; o.id != c.ID || o.state != stateOf(c.State) {
			return false
		}
	}
	return true
}

// findOld returns the state of container id in the record, containers before
// sandboxes.
func (r *podRecord) findOld(id runtime.ContainerID) plegState {
	for _, o := range r.old {
		if o.id == id {
			return o.state
		}
	}
	return nonExistent
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

// appendEvents appends to buf the events that take pod pid from the record's
// listing to cur, over the union of their containers and sandboxes. cur is
// nil for a pod that is no longer listed.
func appendEvents(buf []PodLifecycleEvent, pid types.UID, old *podRecord, cur *runtime.Pod) []PodLifecycleEvent {
	if cur != nil {
		for list, cs := range [2][]*runtime.Container{cur.Containers, cur.Sandboxes} {
			for i, c := range cs {
				if seenBefore(cur, list, i, c.ID) {
					continue
				}
				buf = appendTransition(buf, pid, c.ID, old.findOld(c.ID), stateOf(c.State))
			}
		}
	}
	for i, o := range old.old {
		if find(cur, o.id) != nonExistent || old.seenBefore(i) {
			continue
		}
		buf = appendTransition(buf, pid, o.id, o.state, nonExistent)
	}
	return buf
}

// seenBefore reports whether the record's entry i repeats an earlier ID.
func (r *podRecord) seenBefore(i int) bool {
	for _, o := range r.old[:i] {
		if o.id == r.old[i].id {
			return true
		}
	}
	return false
}

// appendTransition appends the events of one container moving from one state
// to another: to running, ContainerStarted; to exited, ContainerDied; to
// created or unknown, containerChanged; gone, ContainerRemoved, preceded by
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
		ev.Type = containerChanged
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
