package fake

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// Usage scripts a container's resource use, as ListPodStats and
// NodeStats report it. It is evaluated against the clock on every read,
// so a test pushes a node into pressure by stepping a fake clock.
type Usage struct {
	// CPUMilli is the CPU the container uses, in millicores: its
	// cumulative CPU time grows at this rate while it runs.
	CPUMilli int64
	// MemoryBytes is its working set when the usage is set (at start, or
	// by SetUsage); MemoryGrowth bytes per second are added from then on.
	MemoryBytes, MemoryGrowth uint64
	// DiskBytes is its writable layer, growing by DiskGrowth bytes per
	// second from then on.
	DiskBytes, DiskGrowth uint64
}

// NodeCapacity is the fake node's size, as NodeStats reports it.
type NodeCapacity struct {
	// MemoryBytes is the node's memory. Default 16 GiB.
	MemoryBytes uint64
	// FsBytes and FsInodes size the node's root filesystem (nodefs).
	// Defaults 100 GiB and 10 million.
	FsBytes, FsInodes uint64
	// MaxPID is the pid limit. Default 4194304 (Linux's pid_max).
	MaxPID int64
}

func (c NodeCapacity) withDefaults() NodeCapacity {
	if c.MemoryBytes == 0 {
		c.MemoryBytes = 16 << 30
	}
	if c.FsBytes == 0 {
		c.FsBytes = 100 << 30
	}
	if c.FsInodes == 0 {
		c.FsInodes = 10_000_000
	}
	if c.MaxPID == 0 {
		c.MaxPID = 4194304
	}
	return c
}

// usageState is a container's scripted usage since it was last set.
type usageState struct {
	u     Usage
	since time.Time
	// cpuBase is the CPU time used before since, in nanoseconds.
	cpuBase uint64
}

// at is the usage at now (no earlier than since): CPU time in
// nanoseconds, working set and writable layer in bytes.
func (s *usageState) at(now time.Time) (cpu, mem, disk uint64) {
	d := now.Sub(s.since)
	if d < 0 {
		d = 0
	}
	if m := uint64(max(s.u.CPUMilli, 0)); m > 0 {
		// d/1000*m first: months of a few cores stay within uint64.
		ns := uint64(d)
		cpu = ns/1000*m + ns%1000*m/1000
	}
	cpu += s.cpuBase
	secs := d.Seconds()
	mem = s.u.MemoryBytes + uint64(float64(s.u.MemoryGrowth)*secs)
	disk = s.u.DiskBytes + uint64(float64(s.u.DiskGrowth)*secs)
	return cpu, mem, disk
}

// reset makes u the usage from now on, keeping the CPU time used so far.
func (s *usageState) reset(u Usage, now time.Time) {
	s.cpuBase, _, _ = s.at(now)
	s.u, s.since = u, now
}

// SetUsage makes u the usage of the running container named name in pod
// uid from now on (its CPU time so far is kept); a container that does not
// run gives an error wrapping runtime.ErrNotFound. A container's first
// usage is its Behavior's Usage, from its start.
func (r *Runtime) SetUsage(uid types.UID, name string, u Usage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	p := r.pods[uid]
	if p != nil {
		r.settle(p, now)
		if c := p.newest(name); c != nil && c.running() {
			c.usage.reset(u, now)
			return nil
		}
	}
	return fmt.Errorf("fake: no running container %q in pod %s: %w", name, uid, runtime.ErrNotFound)
}

// SetNodeCapacity sets the node's size NodeStats reports; zero fields take
// their defaults.
func (r *Runtime) SetNodeCapacity(c NodeCapacity) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodeCap = c.withDefaults()
}

// SetNodeOverhead sets what the node uses outside its pods (the system,
// the agent) from now on; NodeStats adds it to the pods' usage, its disk
// on nodefs.
func (r *Runtime) SetNodeOverhead(u Usage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.overhead.reset(u, r.clock.Now())
}

var (
	_ runtime.PodStatsLister = (*Runtime)(nil)
	_ runtime.NodeStatser    = (*Runtime)(nil)
)

// ListPodStats reports the scripted usage of the running containers of
// pods with a ready sandbox (only cumulative CPU time: the rate is the
// consumer's to compute) and no pod-level figures.
func (r *Runtime) ListPodStats(ctx context.Context) ([]runtime.PodStats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	out := make([]runtime.PodStats, 0, len(r.pods))
	for _, p := range r.order {
		if p.removed {
			continue
		}
		r.settle(p, now)
		s := p.newestSandbox()
		if s == nil || s.state != runtime.SandboxStateReady {
			continue
		}
		ps := runtime.PodStats{UID: p.uid, Name: p.name, Namespace: p.namespace, SandboxID: s.id, CreatedAt: s.createdAt}
		for _, c := range p.containers {
			if c.sandboxID != s.id || c.state != runtime.ContainerStateRunning {
				continue
			}
			cpu, mem, disk := c.usage.at(now)
			ps.Containers = append(ps.Containers, runtime.ContainerStats{
				ID: c.id, Name: c.name, CreatedAt: c.createdAt,
				CPU:           &runtime.CPUUsage{Time: now, UsageCoreNanoSeconds: &cpu},
				Memory:        &runtime.MemoryUsage{Time: now, WorkingSetBytes: &mem, UsageBytes: &mem, RSSBytes: &mem},
				WritableLayer: &runtime.FsUsage{Time: now, UsedBytes: &disk},
			})
		}
		out = append(out, ps)
	}
	return out, nil
}

// NodeStats reports the node's scripted figures: its capacity
// (SetNodeCapacity), and as usage the overhead (SetNodeOverhead) plus
// every running container's usage; nodefs holds the overhead's disk and,
// without a dedicated image filesystem (SetImageFsCapacity), the images
// and the containers' writable layers. The node started when the runtime
// was made; it runs one process per running container.
func (r *Runtime) NodeStats(ctx context.Context) (*runtime.NodeStats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	cpu, mem, disk := r.overhead.at(now)
	var procs int64
	layers := r.writableLayersLocked(now, func(c *container, cc, cm uint64) {
		cpu += cc
		mem += cm
		procs++
	})
	if r.imageFsCap == 0 {
		disk += layers + uint64(len(r.images))*imageSize
	}
	capa := r.nodeCap
	avail := uint64(0)
	if mem < capa.MemoryBytes {
		avail = capa.MemoryBytes - mem
	}
	fsAvail := uint64(0)
	if disk < capa.FsBytes {
		fsAvail = capa.FsBytes - disk
	}
	inodesUsed := uint64(procs) // a file per container, so inodes move too
	inodesFree := capa.FsInodes - min(inodesUsed, capa.FsInodes)
	return &runtime.NodeStats{
		StartTime: r.started,
		CPU:       &runtime.CPUUsage{Time: now, UsageCoreNanoSeconds: &cpu},
		Memory:    &runtime.MemoryUsage{Time: now, WorkingSetBytes: &mem, UsageBytes: &mem, RSSBytes: &mem, AvailableBytes: &avail},
		Fs: &runtime.FsUsage{Time: now, UsedBytes: &disk, CapacityBytes: &capa.FsBytes, AvailableBytes: &fsAvail,
			Inodes: &capa.FsInodes, InodesFree: &inodesFree, InodesUsed: &inodesUsed},
		MaxPID:    &capa.MaxPID,
		Processes: &procs,
	}, nil
}

// writableLayersLocked settles every pod, calls each for every running
// container with its CPU time and working set, and returns the total of
// their writable layers; r.mu must be held.
func (r *Runtime) writableLayersLocked(now time.Time, each func(c *container, cpu, mem uint64)) uint64 {
	var layers uint64
	for _, p := range r.pods {
		r.settle(p, now)
		for _, c := range p.containers {
			if c.state != runtime.ContainerStateRunning {
				continue
			}
			cc, cm, cd := c.usage.at(now)
			if each != nil {
				each(c, cc, cm)
			}
			layers += cd
		}
	}
	return layers
}
