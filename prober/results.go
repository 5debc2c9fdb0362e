package prober

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// ProbeType is the kind of a probe.
type ProbeType uint8

// The probe types, as in the container spec.
const (
	Liveness ProbeType = iota
	Readiness
	Startup
	numProbeTypes
)

// String returns "Liveness", "Readiness" or "Startup", as the kubelet's
// event messages spell them.
func (t ProbeType) String() string {
	switch t {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	}
	return "Unknown"
}

// Result is the verdict of a probe on a container instance, once its
// success or failure threshold was reached.
type Result uint8

// Probe results.
const (
	// Unknown: no verdict yet (a startup probe before its first threshold).
	Unknown Result = iota
	Success
	Failure
)

// String returns "Unknown", "Success" or "Failure".
func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	}
	return "Unknown"
}

// Update is a change of a probe's result for a container instance.
type Update struct {
	Type        ProbeType
	ContainerID runtime.ContainerID
	PodUID      types.UID
	Result      Result
}

type resultKey struct {
	typ ProbeType
	id  runtime.ContainerID
}

// results is the results cache: the current result of every probe by
// container ID, and the queue of changes not yet delivered on the updates
// stream. Set never blocks: changes queue up (coalesced per probe and
// container, the latest result wins) until the pump delivers them.
type results struct {
	mu      sync.Mutex
	current map[resultKey]Result
	// pending are the undelivered changes, in order; queued indexes them.
	pending []Update
	queued  map[resultKey]int
	// onQueued is called, without mu, after set queued a change.
	onQueued func()
}

func newResults() *results {
	return &results{
		current: map[resultKey]Result{},
		queued:  map[resultKey]int{},
	}
}

func (r *results) get(t ProbeType, id runtime.ContainerID) (Result, bool) {
	r.mu.Lock()
	res, ok := r.current[resultKey{t, id}]
	r.mu.Unlock()
	return res, ok
}

// set records res and queues an update if it changed.
func (r *results) set(t ProbeType, id runtime.ContainerID, pod types.UID, res Result) {
	k := resultKey{t, id}
	r.mu.Lock()
	if old, ok := r.current[k]; ok && old == res {
		r.mu.Unlock()
		return
	}
	r.current[k] = res
	u := Update{Type: t, ContainerID: id, PodUID: pod, Result: res}
	if i, ok := r.queued[k]; ok {
		r.pending[i] = u
		r.mu.Unlock()
		return
	}
	r.queued[k] = len(r.pending)
	r.pending = append(r.pending, u)
	r.mu.Unlock()
	if r.onQueued != nil {
		r.onQueued()
	}
}

// empty reports whether no change is pending.
func (r *results) empty() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending) == 0
}

// init records res as the first result of a new container instance
// without queueing an update: the initial result (Failure for readiness,
// Success for liveness, Unknown for startup) is what the pod's status
// already says of a container with no result, so an update would only
// sync the pod for nothing. Queued, it would reach the agent as an update
// of its own or be overtaken by the first verdict, as the results pump
// happens to run, and a pod would sync once or twice in one instant.
func (r *results) init(t ProbeType, id runtime.ContainerID, res Result) {
	r.mu.Lock()
	r.current[resultKey{t, id}] = res
	r.mu.Unlock()
}

func (r *results) remove(t ProbeType, id runtime.ContainerID) {
	r.mu.Lock()
	delete(r.current, resultKey{t, id})
	r.mu.Unlock()
}

// take returns the pending updates and empties the queue; buf is reused.
func (r *results) take(buf []Update) []Update {
	r.mu.Lock()
	defer r.mu.Unlock()
	buf = append(buf[:0], r.pending...)
	r.pending = r.pending[:0]
	clear(r.queued)
	return buf
}
