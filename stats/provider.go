package stats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// ErrInvalidConfig is wrapped by New when the Config is unusable.
var ErrInvalidConfig = errors.New("stats: invalid config")

// Config configures a Provider. NodeName and Runtime are required.
type Config struct {
	// NodeName is the summary's node name.
	NodeName string
	// Runtime runs the pods. Its optional capabilities are the sources:
	// runtime.PodStatsLister measures the pods (else GetPods lists them
	// and their cgroups measure them), runtime.NodeStatser the node (else
	// the host: /proc, the root cgroup, statfs of RootDir),
	// runtime.ImageFsInfoer the image filesystem.
	Runtime runtime.Runtime
	// RootDir is the agent's root directory; the filesystem holding it is
	// nodefs. Default "/var/lib/kubelet", or "/" where that does not exist.
	RootDir string
	// PodLogsDir holds the pods' logs
	// (<namespace>_<name>_<uid>/<container>), measured for their
	// ephemeral storage. Default "/var/log/pods"; "-" measures none.
	PodLogsDir string
	// PodCgroupRoot is the cgroup holding the pods' cgroups when the agent
	// uses QoS cgroups (cm's "/kubepods", or "/kubepods.slice" with the
	// systemd driver), which then give the pods' CPU, memory and process
	// counts and the "pods" system container. Default whichever of those
	// two exists at New; "-" for none. Unused when the runtime is a
	// runtime.NodeStatser.
	PodCgroupRoot string
	// ProcRoot and CgroupRoot are where /proc and the cgroup hierarchies
	// are mounted, for tests. Defaults "/proc" and "/sys/fs/cgroup".
	ProcRoot, CgroupRoot string
	// UpdatePeriod is how often Run takes an updating sample, the
	// kubelet's cadvisor housekeeping. Default 10s.
	UpdatePeriod time.Duration
	// Clock stamps host samples and ages cached CPU samples. Default the
	// real clock.
	Clock clock.WithTicker
	// Log receives what a summary had to leave out. Default logr.Discard().
	Log logr.Logger
}

// Provider builds the kubelet's stats Summary. It is safe for concurrent
// use.
type Provider struct {
	cfg   Config
	log   logr.Logger
	cg    cgroups
	rates *rates

	pods    runtime.PodStatsLister // nil: GetPods and cgroups
	node    runtime.NodeStatser    // nil: the host
	imageFs runtime.ImageFsInfoer  // nil: no runtime stats
}

// New checks c and returns a Provider.
func New(c Config) (*Provider, error) {
	if c.NodeName == "" {
		return nil, fmt.Errorf("%w: NodeName is required", ErrInvalidConfig)
	}
	if c.Runtime == nil {
		return nil, fmt.Errorf("%w: Runtime is required", ErrInvalidConfig)
	}
	if c.UpdatePeriod < 0 {
		return nil, fmt.Errorf("%w: negative UpdatePeriod", ErrInvalidConfig)
	}
	if c.UpdatePeriod == 0 {
		c.UpdatePeriod = 10 * time.Second
	}
	if c.ProcRoot == "" {
		c.ProcRoot = "/proc"
	}
	if c.CgroupRoot == "" {
		c.CgroupRoot = "/sys/fs/cgroup"
	}
	if c.RootDir == "" {
		c.RootDir = "/var/lib/kubelet"
		if _, _, _, _, _, err := fsInfo(c.RootDir); err != nil {
			c.RootDir = "/"
		}
	}
	if c.PodLogsDir == "" {
		c.PodLogsDir = "/var/log/pods"
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	p := &Provider{cfg: c, log: c.Log, cg: newCgroups(c.CgroupRoot), rates: newRates(c.Clock)}
	p.pods, _ = c.Runtime.(runtime.PodStatsLister)
	p.node, _ = c.Runtime.(runtime.NodeStatser)
	p.imageFs, _ = c.Runtime.(runtime.ImageFsInfoer)
	switch {
	case p.node != nil || c.PodCgroupRoot == "-":
		p.cfg.PodCgroupRoot = ""
	case c.PodCgroupRoot == "":
		for _, root := range []string{"/kubepods", "/kubepods.slice"} {
			if p.cg.exists(root) {
				p.cfg.PodCgroupRoot = root
				break
			}
		}
	}
	return p, nil
}

// GetStatsSummary is the summary /stats/summary serves: Summary without
// updating the CPU rates (virtual-kubelet's provider method).
func (p *Provider) GetStatsSummary(ctx context.Context) (*statsapi.Summary, error) {
	return p.Summary(ctx, false)
}

// GetCPUAndMemoryStats is the summary of ?only_cpu_and_memory=true and of
// /metrics/resource: CPU, memory and swap of the node, its pods and their
// containers, nothing else.
func (p *Provider) GetCPUAndMemoryStats(ctx context.Context) (*statsapi.Summary, error) {
	return p.build(ctx, false, true)
}

// Summary builds the node's summary. With updateStats the CPU rates
// (usageNanoCores) the runtime does not report are computed against the
// previous updating call's samples and kept; without, the rates the last
// update computed are returned. One caller should update, periodically:
// Run, or the eviction manager, as in the kubelet.
func (p *Provider) Summary(ctx context.Context, updateStats bool) (*statsapi.Summary, error) {
	return p.build(ctx, updateStats, false)
}

// Update takes an updating sample (Summary with updateStats) and drops it.
func (p *Provider) Update(ctx context.Context) error {
	_, err := p.Summary(ctx, true)
	return err
}

// Run updates the CPU rates every UpdatePeriod until ctx ends, as the
// kubelet's cadvisor housekeeping does; errors are logged.
func (p *Provider) Run(ctx context.Context) error {
	t := p.cfg.Clock.NewTicker(p.cfg.UpdatePeriod)
	defer t.Stop()
	for {
		if err := p.Update(ctx); err != nil && ctx.Err() == nil {
			p.log.Error(err, "Failed to update stats")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// build makes a summary; cpuMem leaves out filesystems, rlimit and
// process counts.
func (p *Provider) build(ctx context.Context, update, cpuMem bool) (*statsapi.Summary, error) {
	node, err := p.nodeStats(ctx, update, cpuMem)
	if err != nil {
		return nil, err
	}
	var rootFs *statsapi.FsStats
	if !cpuMem {
		rootFs = node.Fs
		if node.Runtime, err = p.runtimeFs(ctx, rootFs); err != nil {
			return nil, err
		}
	}
	pods, err := p.podStats(ctx, update, cpuMem, rootFs, imageFsOf(node.Runtime))
	if err != nil {
		return nil, err
	}
	if sys := p.podsContainer(update, cpuMem); sys != nil {
		node.SystemContainers = []statsapi.ContainerStats{*sys}
	}
	p.rates.sweep()
	return &statsapi.Summary{Node: *node, Pods: pods}, nil
}

func imageFsOf(r *statsapi.RuntimeStats) *statsapi.FsStats {
	if r == nil {
		return nil
	}
	return r.ImageFs
}

// nodeStats is the node's CPU, memory, swap, nodefs and rlimit.
func (p *Provider) nodeStats(ctx context.Context, update, cpuMem bool) (*statsapi.NodeStats, error) {
	ns := &statsapi.NodeStats{NodeName: p.cfg.NodeName}
	if p.node != nil {
		n, err := p.node.NodeStats(ctx)
		if err != nil {
			return nil, fmt.Errorf("failed to get node stats: %w", err)
		}
		ns.StartTime = metav1.NewTime(n.StartTime)
		ns.CPU = p.cpuStats("node", n.CPU, update)
		ns.Memory = memoryStats(n.Memory)
		if !cpuMem {
			ns.Fs = fsStats(n.Fs)
			if n.MaxPID != nil || n.Processes != nil {
				ns.Rlimit = &statsapi.RlimitStats{Time: metav1.NewTime(p.cfg.Clock.Now()), MaxPID: n.MaxPID, NumOfRunningProcesses: n.Processes}
			}
		}
		return ns, nil
	}
	now := metav1.NewTime(p.cfg.Clock.Now())
	boot, procCPU, err := procStat(p.cfg.ProcRoot)
	if err != nil {
		p.log.V(4).Info("No boot time", "err", err)
	}
	ns.StartTime = metav1.NewTime(boot)
	root, err := p.cg.read("/")
	if err != nil {
		p.log.V(4).Info("No root cgroup", "err", err)
	}
	if cpu := root.cpuNanos; cpu != nil || procCPU != nil {
		if cpu == nil {
			cpu = procCPU
		}
		ns.CPU = p.cpuStats("node", &runtime.CPUUsage{Time: now.Time, UsageCoreNanoSeconds: cpu}, update)
	}
	if mi, err := readMeminfo(p.cfg.ProcRoot); err != nil {
		p.log.V(4).Info("No meminfo", "err", err)
	} else {
		ns.Memory = nodeMemory(now, root, mi)
		if total, ok := mi["SwapTotal"]; ok {
			free := mi["SwapFree"]
			ns.Swap = &statsapi.SwapStats{Time: now, SwapAvailableBytes: ptr(free), SwapUsageBytes: ptr(total - min(free, total))}
		}
	}
	if !cpuMem {
		if capa, avail, used, inodes, free, err := fsInfo(p.cfg.RootDir); err != nil {
			p.log.V(4).Info("No nodefs", "dir", p.cfg.RootDir, "err", err)
		} else {
			ns.Fs = &statsapi.FsStats{Time: now, CapacityBytes: &capa, AvailableBytes: &avail, UsedBytes: &used,
				Inodes: &inodes, InodesFree: &free, InodesUsed: ptr(inodes - min(free, inodes))}
		}
		maxPID, procs := rlimit(p.cfg.ProcRoot)
		ns.Rlimit = &statsapi.RlimitStats{Time: now, MaxPID: maxPID, NumOfRunningProcesses: procs}
	}
	return ns, nil
}

// nodeMemory is the root cgroup's memory as cadvisor gives it, the
// machine's memory its limit; where the root cgroup has no usage (cgroup
// v2), /proc/meminfo's total less free is the usage, less inactive file
// pages the working set.
func nodeMemory(now metav1.Time, root cgroupSample, mi map[string]uint64) *statsapi.MemoryStats {
	total := mi["MemTotal"]
	m := &statsapi.MemoryStats{Time: now, UsageBytes: root.usage, WorkingSetBytes: root.workingSet, RSSBytes: root.rss,
		PageFaults: root.pgfault, MajorPageFaults: root.pgmajfault}
	if m.UsageBytes == nil {
		usage := total - min(mi["MemFree"], total)
		ws := usage - min(mi["Inactive(file)"], usage)
		m.UsageBytes, m.WorkingSetBytes = &usage, &ws
		if anon, ok := mi["AnonPages"]; ok {
			m.RSSBytes = ptr(anon)
		}
	}
	m.AvailableBytes = ptr(total - min(*m.WorkingSetBytes, total))
	return m
}

// runtimeFs is the image filesystem (also the container filesystem, as
// the kubelet's CRI stats provider reports it). A runtime that leaves the
// capacity unknown shares nodefs.
func (p *Provider) runtimeFs(ctx context.Context, rootFs *statsapi.FsStats) (*statsapi.RuntimeStats, error) {
	if p.imageFs == nil {
		return nil, nil
	}
	st, err := p.imageFs.ImageFsInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to get imageFs stats: %w", err)
	}
	fs := &statsapi.FsStats{Time: metav1.NewTime(p.cfg.Clock.Now()), UsedBytes: ptr(st.UsedBytes)}
	if st.InodesUsed != 0 {
		fs.InodesUsed = ptr(st.InodesUsed)
	}
	switch {
	case st.CapacityBytes != 0:
		fs.CapacityBytes, fs.AvailableBytes = ptr(st.CapacityBytes), ptr(st.AvailableBytes)
		if st.Inodes != 0 {
			fs.Inodes, fs.InodesFree = ptr(st.Inodes), ptr(st.InodesFree)
		}
	case rootFs != nil:
		fs.CapacityBytes, fs.AvailableBytes, fs.Inodes, fs.InodesFree = rootFs.CapacityBytes, rootFs.AvailableBytes, rootFs.Inodes, rootFs.InodesFree
	}
	return &statsapi.RuntimeStats{ImageFs: fs, ContainerFs: fs}, nil
}

// podStats lists the pods' stats, ordered by namespace and name.
func (p *Provider) podStats(ctx context.Context, update, cpuMem bool, rootFs, imageFs *statsapi.FsStats) ([]statsapi.PodStats, error) {
	var list []runtime.PodStats
	if p.pods != nil {
		var err error
		if list, err = p.pods.ListPodStats(ctx); err != nil {
			return nil, fmt.Errorf("failed to list pod stats: %w", err)
		}
	} else {
		pods, err := p.cfg.Runtime.GetPods(ctx, false)
		if err != nil {
			return nil, fmt.Errorf("failed to list pods: %w", err)
		}
		list = make([]runtime.PodStats, 0, len(pods))
		for _, rp := range pods {
			ps := runtime.PodStats{UID: rp.ID, Name: rp.Name, Namespace: rp.Namespace, CreatedAt: time.Unix(0, int64(rp.CreatedAt))}
			for _, c := range rp.Containers {
				if c.State == runtime.ContainerStateRunning {
					ps.Containers = append(ps.Containers, runtime.ContainerStats{ID: c.ID, Name: c.Name, CreatedAt: time.Unix(0, c.CreatedAt)})
				}
			}
			list = append(list, ps)
		}
	}
	var podCgroups map[string]string
	if p.cfg.PodCgroupRoot != "" {
		podCgroups = p.cg.findPodCgroups(p.cfg.PodCgroupRoot)
	}
	slices.SortFunc(list, func(a, b runtime.PodStats) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	out := make([]statsapi.PodStats, 0, len(list))
	for i := range list {
		out = append(out, p.pod(&list[i], podCgroups[string(list[i].UID)], update, cpuMem, rootFs, imageFs))
	}
	return out, nil
}

// pod converts one pod's stats; cgroup is its cgroup, "" if none. Pod
// CPU and memory come from the runtime, else the cgroup, else the sum of
// the containers'.
func (p *Provider) pod(rp *runtime.PodStats, cgroup string, update, cpuMem bool, rootFs, imageFs *statsapi.FsStats) statsapi.PodStats {
	ps := statsapi.PodStats{
		PodRef:     statsapi.PodReference{Name: rp.Name, Namespace: rp.Namespace, UID: string(rp.UID)},
		StartTime:  metav1.NewTime(rp.CreatedAt),
		Containers: make([]statsapi.ContainerStats, 0, len(rp.Containers)),
	}
	now := p.cfg.Clock.Now()
	var cg *cgroupSample
	if cgroup != "" {
		if s, err := p.cg.read(cgroup); err == nil {
			cg = &s
		}
	}
	logsDir := ""
	if !cpuMem && p.node == nil && p.cfg.PodLogsDir != "-" {
		logsDir = filepath.Join(p.cfg.PodLogsDir, rp.Namespace+"_"+rp.Name+"_"+string(rp.UID))
	}
	for i := range rp.Containers {
		c := &rp.Containers[i]
		if c.CPU == nil && c.Memory == nil && cgroup != "" {
			if ccg, ok := p.cg.containerCgroup(cgroup, c.ID.ID); ok {
				if s, err := p.cg.read(ccg); err == nil {
					c.CPU, c.Memory = s.cpuUsage(now), s.memoryUsage(now)
				}
			}
		}
		cs := statsapi.ContainerStats{
			Name:      c.Name,
			StartTime: metav1.NewTime(c.CreatedAt),
			CPU:       p.cpuStats("container/"+c.ID.String(), c.CPU, update),
			Memory:    memoryStats(c.Memory),
		}
		if cpuMem {
			// As the kubelet's resource metrics: missing values are zeros.
			if cs.CPU == nil {
				cs.CPU = &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: ptr[uint64](0), UsageNanoCores: ptr[uint64](0)}
			}
			if cs.Memory == nil {
				cs.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(now), WorkingSetBytes: ptr[uint64](0), UsageBytes: ptr[uint64](0), RSSBytes: ptr[uint64](0)}
			}
		} else {
			cs.Rootfs = containerFs(c.WritableLayer, imageFs)
			if logsDir != "" {
				cs.Logs = logStats(filepath.Join(logsDir, c.Name), now, rootFs)
			}
		}
		ps.Containers = append(ps.Containers, cs)
	}
	switch {
	case rp.CPU != nil || rp.Memory != nil:
		ps.CPU = p.cpuStats("pod/"+string(rp.UID), rp.CPU, update)
		ps.Memory = memoryStats(rp.Memory)
	case cg != nil:
		ps.CPU = p.cpuStats("pod/"+string(rp.UID), cg.cpuUsage(now), update)
		ps.Memory = memoryStats(cg.memoryUsage(now))
	default:
		ps.CPU, ps.Memory = sumCPU(ps.Containers), sumMemory(ps.Containers)
	}
	if cpuMem {
		return ps
	}
	switch {
	case rp.Processes != nil:
		ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: rp.Processes}
	case cg != nil && cg.pids != nil:
		ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: cg.pids}
	}
	ps.EphemeralStorage = ephemeralStorage(ps.Containers, rootFs, now)
	return ps
}

// podsContainer is the "pods" system container, the cgroup all pods are
// in, whose memory the allocatable memory eviction signal reads.
func (p *Provider) podsContainer(update, cpuMem bool) *statsapi.ContainerStats {
	if p.cfg.PodCgroupRoot == "" {
		return nil
	}
	s, err := p.cg.read(p.cfg.PodCgroupRoot)
	if err != nil {
		p.log.V(4).Info("No pods cgroup", "cgroup", p.cfg.PodCgroupRoot, "err", err)
		return nil
	}
	now := p.cfg.Clock.Now()
	return &statsapi.ContainerStats{
		Name:   statsapi.SystemContainerPods,
		CPU:    p.cpuStats("system/pods", s.cpuUsage(now), update),
		Memory: memoryStats(s.memoryUsage(now)),
	}
}

func (s *cgroupSample) cpuUsage(now time.Time) *runtime.CPUUsage {
	if s.cpuNanos == nil {
		return nil
	}
	return &runtime.CPUUsage{Time: now, UsageCoreNanoSeconds: s.cpuNanos}
}

func (s *cgroupSample) memoryUsage(now time.Time) *runtime.MemoryUsage {
	if s.usage == nil {
		return nil
	}
	m := &runtime.MemoryUsage{Time: now, UsageBytes: s.usage, WorkingSetBytes: s.workingSet, RSSBytes: s.rss, PageFaults: s.pgfault, MajorPageFaults: s.pgmajfault}
	if s.limit != nil && s.workingSet != nil {
		m.AvailableBytes = ptr(*s.limit - min(*s.workingSet, *s.limit))
	}
	return m
}

// cpuStats converts a CPU sample, computing the rate under key when the
// runtime gave none.
func (p *Provider) cpuStats(key string, u *runtime.CPUUsage, update bool) *statsapi.CPUStats {
	if u == nil {
		return nil
	}
	cs := &statsapi.CPUStats{Time: metav1.NewTime(u.Time), UsageCoreNanoSeconds: u.UsageCoreNanoSeconds, UsageNanoCores: u.UsageNanoCores}
	if cs.UsageNanoCores == nil && u.UsageCoreNanoSeconds != nil {
		cs.UsageNanoCores = p.rates.rate(key, u.Time, *u.UsageCoreNanoSeconds, update)
	}
	return cs
}

func memoryStats(m *runtime.MemoryUsage) *statsapi.MemoryStats {
	if m == nil {
		return nil
	}
	return &statsapi.MemoryStats{Time: metav1.NewTime(m.Time), AvailableBytes: m.AvailableBytes, UsageBytes: m.UsageBytes,
		WorkingSetBytes: m.WorkingSetBytes, RSSBytes: m.RSSBytes, PageFaults: m.PageFaults, MajorPageFaults: m.MajorPageFaults}
}

func fsStats(f *runtime.FsUsage) *statsapi.FsStats {
	if f == nil {
		return nil
	}
	return &statsapi.FsStats{Time: metav1.NewTime(f.Time), AvailableBytes: f.AvailableBytes, CapacityBytes: f.CapacityBytes,
		UsedBytes: f.UsedBytes, InodesFree: f.InodesFree, Inodes: f.Inodes, InodesUsed: f.InodesUsed}
}

// containerFs is a container's rootfs: its writable layer's usage on the
// image filesystem's figures, as the kubelet's CRI stats provider.
func containerFs(l *runtime.FsUsage, imageFs *statsapi.FsStats) *statsapi.FsStats {
	if l == nil {
		return nil
	}
	fs := fsStats(l)
	if imageFs != nil && fs.CapacityBytes == nil {
		fs.CapacityBytes, fs.AvailableBytes, fs.Inodes, fs.InodesFree = imageFs.CapacityBytes, imageFs.AvailableBytes, imageFs.Inodes, imageFs.InodesFree
	}
	return fs
}

// logStats measures a container's log directory on nodefs; nil if it
// cannot be read.
func logStats(dir string, now time.Time, rootFs *statsapi.FsStats) *statsapi.FsStats {
	used, inodes, err := dirUsage(dir)
	if err != nil {
		return nil
	}
	fs := &statsapi.FsStats{Time: metav1.NewTime(now), UsedBytes: &used, InodesUsed: &inodes}
	if rootFs != nil {
		fs.CapacityBytes, fs.AvailableBytes, fs.Inodes, fs.InodesFree = rootFs.CapacityBytes, rootFs.AvailableBytes, rootFs.Inodes, rootFs.InodesFree
	}
	return fs
}

// ephemeralStorage is the kubelet's calcEphemeralStorage without volumes:
// the containers' rootfs and logs on nodefs's figures.
func ephemeralStorage(cs []statsapi.ContainerStats, rootFs *statsapi.FsStats, now time.Time) *statsapi.FsStats {
	out := &statsapi.FsStats{Time: metav1.NewTime(now)}
	if rootFs != nil {
		out.CapacityBytes, out.AvailableBytes, out.Inodes, out.InodesFree = rootFs.CapacityBytes, rootFs.AvailableBytes, rootFs.Inodes, rootFs.InodesFree
	}
	for _, c := range cs {
		for _, f := range []*statsapi.FsStats{c.Rootfs, c.Logs} {
			if f == nil {
				continue
			}
			out.UsedBytes = addUsage(out.UsedBytes, f.UsedBytes)
			out.InodesUsed = addUsage(out.InodesUsed, f.InodesUsed)
		}
	}
	return out
}

func addUsage(a, b *uint64) *uint64 {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return ptr(*a + *b)
}

// sumCPU is a pod's CPU as its containers' sum, as the kubelet's CRI
// stats provider does without pod-level stats; nil without any.
func sumCPU(cs []statsapi.ContainerStats) *statsapi.CPUStats {
	var out *statsapi.CPUStats
	for _, c := range cs {
		if c.CPU == nil {
			continue
		}
		if out == nil {
			out = &statsapi.CPUStats{}
		}
		out.Time = c.CPU.Time
		out.UsageCoreNanoSeconds = ptr(deref(out.UsageCoreNanoSeconds) + deref(c.CPU.UsageCoreNanoSeconds))
		out.UsageNanoCores = ptr(deref(out.UsageNanoCores) + deref(c.CPU.UsageNanoCores))
	}
	return out
}

func sumMemory(cs []statsapi.ContainerStats) *statsapi.MemoryStats {
	var out *statsapi.MemoryStats
	for _, c := range cs {
		m := c.Memory
		if m == nil {
			continue
		}
		if out == nil {
			out = &statsapi.MemoryStats{}
		}
		out.Time = m.Time
		out.AvailableBytes = ptr(deref(out.AvailableBytes) + deref(m.AvailableBytes))
		out.UsageBytes = ptr(deref(out.UsageBytes) + deref(m.UsageBytes))
		out.WorkingSetBytes = ptr(deref(out.WorkingSetBytes) + deref(m.WorkingSetBytes))
		out.RSSBytes = ptr(deref(out.RSSBytes) + deref(m.RSSBytes))
		out.PageFaults = ptr(deref(out.PageFaults) + deref(m.PageFaults))
		out.MajorPageFaults = ptr(deref(out.MajorPageFaults) + deref(m.MajorPageFaults))
	}
	return out
}

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
