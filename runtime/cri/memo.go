package cri

import (
	"iter"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// statusMemo remembers what the runtime said of containers and sandboxes in
// a state whose status no longer changes while the runtime lists them in
// it: a running container (its start time, image and hash are fixed), an
// exited one (its exit code, reason, message and finish time too), and a
// sandbox (its network and namespaces are set when it is made). An
// inspection then asks only for what changed since the last one: a relist
// that sees a pod's new container start asks for that container's status,
// not again for its sandbox's and every other container's. The kubelet asks
// for all of them at every inspection; the statuses are the same.
//
// A created or unknown container is always asked for. Entries of what a
// full listing (GetPods(ctx, true)) no longer shows are dropped.
type statusMemo struct {
	mu         sync.Mutex
	gen        uint64 // the full listings seen
	containers map[string]*memoContainer
	sandboxes  map[string]*memoSandbox
}

// listedAt is the full listing that last showed an entry. Entries are held
// by pointer so that a listing marks them in place, without writing the map.
type listedAt struct{ seen uint64 }

func (l *listedAt) listing() *uint64 { return &l.seen }

type memoContainer struct {
	listedAt
	state  runtime.ContainerState // as listed when the status was asked for
	status runtime.ContainerStatus
}

type memoSandbox struct {
	listedAt
	ready       bool // as listed when the status was asked for
	hostNetwork bool
	ips         []string
}

func newStatusMemo() *statusMemo {
	return &statusMemo{containers: map[string]*memoContainer{}, sandboxes: map[string]*memoSandbox{}}
}

// settled reports whether a container listed in state keeps its status.
func settled(state runtime.ContainerState) bool {
	return state == runtime.ContainerStateRunning || state == runtime.ContainerStateExited
}

// container returns a copy of the status of container id if it was asked
// for while listed in state, which is settled.
func (m *statusMemo) container(id string, state runtime.ContainerState) (*runtime.ContainerStatus, bool) {
	if !settled(state) {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.containers[id]
	if !ok || e.state != state {
		return nil, false
	}
	cs := e.status
	return &cs, true
}

// putContainer remembers status, asked for while the container was listed
// in state.
func (m *statusMemo) putContainer(id string, state runtime.ContainerState, status *runtime.ContainerStatus) {
	if !settled(state) || status.State != state {
		return // the runtime moved on since the listing: ask again next time
	}
	m.mu.Lock()
	m.containers[id] = &memoContainer{listedAt: listedAt{m.gen}, state: state, status: *status}
	m.mu.Unlock()
}

// sandbox returns what sandbox id's status said, if it was asked for while
// the sandbox was listed as ready (or not) as now.
func (m *statusMemo) sandbox(id string, ready bool) (memoSandbox, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.sandboxes[id]
	if !ok || e.ready != ready {
		return memoSandbox{}, false
	}
	return *e, true
}

func (m *statusMemo) putSandbox(id string, e memoSandbox) {
	m.mu.Lock()
	e.seen = m.gen
	m.sandboxes[id] = &e
	m.mu.Unlock()
}

// listed drops the entries of whatever a full listing no longer shows.
func (m *statusMemo) listed(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	keepListed(m.sandboxes, m.gen, func(yield func(string) bool) {
		for _, sb := range sbs {
			if !yield(sb.Id) {
				return
			}
		}
	})
	keepListed(m.containers, m.gen, func(yield func(string) bool) {
		for _, c := range cs {
			if !yield(c.Id) {
				return
			}
		}
	})
}

// keepListed marks the entries of the listed IDs as seen by listing gen and
// drops the others; it walks the map only if there is something to drop.
func keepListed[E interface{ listing() *uint64 }](entries map[string]E, gen uint64, listed iter.Seq[string]) {
	kept := 0
	for id := range listed {
		if e, ok := entries[id]; ok {
			*e.listing() = gen
			kept++
		}
	}
	if kept == len(entries) {
		return
	}
	for id, e := range entries {
		if *e.listing() != gen {
			delete(entries, id)
		}
	}
}
