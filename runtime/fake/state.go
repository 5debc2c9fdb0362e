package fake

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// podState is everything the runtime holds for one pod UID. All fields are
// guarded by Runtime.mu.
type podState struct {
	uid       types.UID
	name      string
	namespace string
	// sandboxes and containers are in creation order, the newest last.
	sandboxes  []*sandbox
	containers []*container
	// killed: KillPod stopped the pod; GarbageCollect with allSourcesReady
	// removes it once nothing of it runs. SyncPod clears it.
	killed bool
	// removed: no longer in Runtime.pods; Runtime.order drops it lazily.
	removed bool
}

type sandbox struct {
	id          string
	state       runtime.SandboxState
	attempt     uint32
	createdAt   time.Time
	ips         []string
	hostNetwork bool
}

type containerKind uint8

const (
	kindRegular containerKind = iota
	kindInit
	kindSidecar
	kindEphemeral
)

type container struct {
	id         runtime.ContainerID
	name       string
	image      string
	imageID    string
	hash       uint64
	sandboxID  string
	kind       containerKind
	state      runtime.ContainerState
	createdAt  time.Time
	startedAt  time.Time
	finishedAt time.Time
	exitCode   int
	reason     string
	message    string
	restarts   int
	// exitAt, when set, is when a running container exits on its own with
	// exitWith.
	exitAt   time.Time
	exitWith int
	// exitScheduled: a clock timer reports the exit to event streams.
	exitScheduled bool
	ignoreTERM    bool
	termExitCode  int
	// logs is what the container printed, in the CRI log format.
	logs []byte
	// readyAt is when unprogrammed commands start to succeed, and the
	// container starts to listen (DialPod).
	readyAt time.Time
	// ports are the TCP ports its spec declares.
	ports []int32
	// spec is what stopping it needs of its spec (see stopSpec).
	spec *v1.Container
	// usage is its scripted resource use.
	usage usageState
}

// tcpPorts are the TCP container ports c declares.
func tcpPorts(c *v1.Container) []int32 {
	var out []int32
	for _, p := range c.Ports {
		if p.Protocol == "" || p.Protocol == v1.ProtocolTCP {
			out = append(out, p.ContainerPort)
		}
	}
	return out
}

// settle applies a programmed exit that is due at now and reports whether
// it did.
func (c *container) settle(now time.Time) bool {
	if c.state == runtime.ContainerStateRunning && !c.exitAt.IsZero() && !now.Before(c.exitAt) {
		c.exit(c.exitAt, c.exitWith, "")
		return true
	}
	return false
}

// exit moves the container to exited; an empty reason is derived from code.
func (c *container) exit(at time.Time, code int, reason string) {
	if reason == "" {
		reason = "Error"
		if code == 0 {
			reason = "Completed"
		}
	}
	c.state, c.finishedAt, c.exitCode, c.reason = runtime.ContainerStateExited, at, code, reason
	c.exitAt = time.Time{}
}

func (c *container) running() bool {
	return c.state == runtime.ContainerStateRunning || c.state == runtime.ContainerStateUnknown
}

// settle applies the due exits of p's containers and reports them to
// watchers; r.mu must be held.
func (r *Runtime) settle(p *podState, now time.Time) {
	for _, c := range p.containers {
		if c.settle(now) {
			r.emit(p, c, runtime.ContainerStoppedEvent)
		}
	}
}

// stop moves c to exited and reports it; r.mu must be held.
func (r *Runtime) stop(p *podState, c *container, at time.Time, code int, reason string) {
	c.exit(at, code, reason)
	r.emit(p, c, runtime.ContainerStoppedEvent)
}

func (p *podState) newestSandbox() *sandbox {
	if len(p.sandboxes) == 0 {
		return nil
	}
	return p.sandboxes[len(p.sandboxes)-1]
}

func (p *podState) sandbox(id string) *sandbox {
	for _, s := range p.sandboxes {
		if s.id == id {
			return s
		}
	}
	return nil
}

// newest returns the newest instance of the named container, or nil.
func (p *podState) newest(name string) *container {
	for i := len(p.containers) - 1; i >= 0; i-- {
		if p.containers[i].name == name {
			return p.containers[i]
		}
	}
	return nil
}

func (p *podState) byID(id runtime.ContainerID) *container {
	for _, c := range p.containers {
		if c.id == id {
			return c
		}
	}
	return nil
}

// listed reports whether GetPods(all=false) shows the container or sandbox.
func listedContainer(c *container, all bool) bool {
	return all || c.state == runtime.ContainerStateRunning
}
func listedSandbox(s *sandbox, all bool) bool { return all || s.state == runtime.SandboxStateReady }

// pod returns the state of pod, creating it; r.mu must be held.
func (r *Runtime) pod(uid types.UID, name, namespace string) *podState {
	p, ok := r.pods[uid]
	if !ok {
		p = &podState{uid: uid}
		r.pods[uid] = p
		r.order = append(r.order, p)
	}
	if name != "" {
		p.name, p.namespace = name, namespace
	}
	return p
}

// removePod forgets a pod; r.mu must be held.
func (r *Runtime) removePod(p *podState) {
	delete(r.pods, p.uid)
	p.removed = true
	for _, c := range p.containers {
		r.emit(p, c, runtime.ContainerDeletedEvent)
		delete(r.execPods, c.id)
	}
	// As containerd 2.x, the sandbox's deletion is a container event too:
	// an evented PLEG forgets the pod on it.
	for _, sb := range p.sandboxes {
		r.emitID(p, runtime.ContainerID{Type: r.typ, ID: sb.id}, runtime.ContainerDeletedEvent)
	}
	// Compact the order once a quarter of it is dead, so removal stays O(1)
	// amortized.
	if dead := len(r.order) - len(r.pods); dead > 16 && dead*4 > len(r.order) {
		kept := r.order[:0]
		for _, q := range r.order {
			if !q.removed {
				kept = append(kept, q)
			}
		}
		clear(r.order[len(kept):])
		r.order = kept
	}
}

// GetPods lists pods newest first (by when the runtime first saw them). With
// all=false only running containers and ready sandboxes are listed, and pods
// with neither are left out. The result is a fresh copy.
func (r *Runtime) GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error) {
	if err := r.enter(ctx, mGetPods, ""); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()

	// Count first, so that the copy takes a fixed number of allocations.
	nPods, nCtrs := 0, 0
	for _, p := range r.order {
		if p.removed {
			continue
		}
		r.settle(p, now)
		n := 0
		for _, c := range p.containers {
			if listedContainer(c, all) {
				n++
			}
		}
		for _, s := range p.sandboxes {
			if listedSandbox(s, all) {
				n++
			}
		}
		if n > 0 {
			nPods++
			nCtrs += n
		}
	}

	pods := make([]runtime.Pod, nPods)
	out := make([]*runtime.Pod, nPods)
	ctrs := make([]runtime.Container, nCtrs)
	ptrs := make([]*runtime.Container, nCtrs)
	pi, ci := 0, 0
	for i := len(r.order) - 1; i >= 0; i-- {
		p := r.order[i]
		if p.removed {
			continue
		}
		start := ci
		for _, c := range p.containers {
			if !listedContainer(c, all) {
				continue
			}
			ctrs[ci] = runtime.Container{ID: c.id, Name: c.name, Image: c.image, ImageID: c.imageID, Hash: c.hash, State: c.state}
			ptrs[ci] = &ctrs[ci]
			ci++
		}
		mid := ci
		for _, s := range p.sandboxes {
			if !listedSandbox(s, all) {
				continue
			}
			state := runtime.ContainerStateExited
			if s.state == runtime.SandboxStateReady {
				state = runtime.ContainerStateRunning
			}
			ctrs[ci] = runtime.Container{ID: runtime.ContainerID{Type: r.typ, ID: s.id}, State: state}
			ptrs[ci] = &ctrs[ci]
			ci++
		}
		if ci == start {
			continue
		}
		pod := &pods[pi]
		*pod = runtime.Pod{ID: p.uid, Name: p.name, Namespace: p.namespace}
		if s := p.newestSandbox(); s != nil {
			pod.CreatedAt = uint64(s.createdAt.UnixNano())
		}
		// Full slice expressions: a caller's append must not run into the
		// next pod's entries.
		if mid > start {
			pod.Containers = ptrs[start:mid:mid]
		}
		if ci > mid {
			pod.Sandboxes = ptrs[mid:ci:ci]
		}
		out[pi] = pod
		pi++
	}
	return out, nil
}

// GetPodStatus returns a fresh status of the pod: container instances newest
// first, sandboxes newest first, the IPs of the newest sandbox if it is
// ready. A pod the runtime does not know gets a status with no containers.
func (r *Runtime) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
	if err := r.enter(ctx, mGetPodStatus, uid); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.podStatus(uid, name, namespace), nil
}

// podStatus builds a PodStatus; r.mu must be held.
func (r *Runtime) podStatus(uid types.UID, name, namespace string) *runtime.PodStatus {
	now := r.clock.Now()
	st := &runtime.PodStatus{ID: uid, Name: name, Namespace: namespace, TimeStamp: now}
	p, ok := r.pods[uid]
	if !ok {
		return st
	}
	r.settle(p, now)
	r.snapshot(p, st)
	return st
}

// snapshot fills st from p as it is; r.mu must be held.
func (r *Runtime) snapshot(p *podState, st *runtime.PodStatus) {
	if p.name != "" {
		st.Name, st.Namespace = p.name, p.namespace
	}

	// One backing array for every IP: the sandboxes' and, not aliasing
	// them, the pod's.
	nIPs := 0
	for _, s := range p.sandboxes {
		nIPs += len(s.ips)
	}
	if s := p.newestSandbox(); s != nil && s.state == runtime.SandboxStateReady {
		nIPs += len(s.ips)
	}
	ips := make([]string, 0, nIPs)

	if n := len(p.sandboxes); n > 0 {
		sbs := make([]runtime.SandboxStatus, n)
		st.SandboxStatuses = make([]*runtime.SandboxStatus, n)
		for i, s := range p.sandboxes {
			j := n - 1 - i
			start := len(ips)
			ips = append(ips, s.ips...)
			sbs[j] = runtime.SandboxStatus{ID: s.id, State: s.state, Attempt: s.attempt, CreatedAt: s.createdAt, HostNetwork: s.hostNetwork}
			if len(ips) > start {
				sbs[j].IPs = ips[start:len(ips):len(ips)]
			}
			st.SandboxStatuses[j] = &sbs[j]
		}
		if newest := st.SandboxStatuses[0]; newest.State == runtime.SandboxStateReady && len(newest.IPs) > 0 {
			start := len(ips)
			ips = append(ips, newest.IPs...)
			st.IPs = ips[start:len(ips):len(ips)]
		}
	}

	if n := len(p.containers); n > 0 {
		css := make([]runtime.ContainerStatus, n)
		st.ContainerStatuses = make([]*runtime.ContainerStatus, n)
		for i, c := range p.containers {
			j := n - 1 - i
			css[j] = runtime.ContainerStatus{
				ID: c.id, Name: c.name, State: c.state,
				CreatedAt: c.createdAt, StartedAt: c.startedAt, FinishedAt: c.finishedAt,
				ExitCode: c.exitCode, Reason: c.reason, Message: c.message,
				Image: c.image, ImageID: c.imageID, Hash: c.hash,
				RestartCount: c.restarts, SandboxID: c.sandboxID,
			}
			st.ContainerStatuses[j] = &css[j]
		}
	}
}

// imageID derives a stable image ID from a reference.
func imageID(ref string) string {
	h := fnv.New64a()
	h.Write([]byte(ref))
	return fmt.Sprintf("sha256:%016x", h.Sum64())
}

// newID returns a fresh sequence number; r.mu must be held.
func (r *Runtime) newID() uint64 {
	r.seq++
	return r.seq
}

// sandboxIP is the IP of a new sandbox with ID n: the PodCIDR's next host
// address (wrapping around, the network and broadcast addresses skipped),
// else 10.x.y.z from n. r.mu is held.
func (r *Runtime) sandboxIP(n uint64) string {
	if !r.podCIDR.IsValid() {
		return fmt.Sprintf("10.%d.%d.%d", byte(n>>16), byte(n>>8), byte(n))
	}
	hosts := uint64(1)<<(32-r.podCIDR.Bits()) - 2
	b := r.podCIDR.Addr().As4()
	v := binary.BigEndian.Uint32(b[:]) + uint32(r.ipSeq%hosts) + 1
	r.ipSeq++
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b).String()
}

// kindOf classifies a container of the pod spec.
func kindOf(c *v1.Container, init bool) containerKind {
	switch {
	case init && podutil.IsRestartableInitContainer(c):
		return kindSidecar
	case init:
		return kindInit
	}
	return kindRegular
}
