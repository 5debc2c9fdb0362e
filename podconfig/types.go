package podconfig

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// PodOperation is what a PodUpdate does.
type PodOperation int

const (
	// SET replaces the source's whole set of pods with the update's pods.
	SET PodOperation = iota
	// ADD: pods new to the source.
	ADD
	// DELETE: pods whose graceful deletion began (deletion timestamp set).
	DELETE
	// REMOVE: pods gone from the source.
	REMOVE
	// UPDATE: pods whose spec, labels or annotations changed.
	UPDATE
	// RECONCILE: pods whose status alone changed.
	RECONCILE
)

var opNames = [...]string{"SET", "ADD", "DELETE", "REMOVE", "UPDATE", "RECONCILE"}

// String returns the operation's name in upper case, as the kubelet logs it.
func (o PodOperation) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return "PodOperation(" + strconv.Itoa(int(o)) + ")"
}

// PodUpdate is one change of pods from one source (or from all, for a SET in
// snapshot mode).
type PodUpdate struct {
	Pods   []*v1.Pod
	Op     PodOperation
	Source string
}
