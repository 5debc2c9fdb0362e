package cm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podutil"
)

var (
	// ErrInvalidConfig is wrapped by New when the Config is unusable.
	ErrInvalidConfig = errors.New("cm: invalid config")
	// ErrUnavailable is wrapped by New when cgroups cannot be managed here:
	// no cgroup file system, or not allowed to write it (rootless, a
	// read-only mount, not Linux). The caller runs without pod cgroups then.
	ErrUnavailable = errors.New("cm: cgroups unavailable")
)

const defaultMountPoint = "/sys/fs/cgroup"

// ReasonCgroupDriverMismatch is the warning event on the node when the
// configured cgroup driver differs from the runtime's (the runtime's wins).
const ReasonCgroupDriverMismatch = "CgroupDriverMismatch"

// EventRecorder records an event; client-go's record.EventRecorder fits.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// DriverSource reports the runtime's cgroup driver ("systemd" or
// "cgroupfs"); *cri.Manager fits (the CRI's RuntimeConfig, containerd 2.x).
// An error (containerd 1.6 answers Unimplemented) leaves Config.Driver.
type DriverSource interface {
	CgroupDriver(ctx context.Context) (string, error)
}

// Config configures a Manager. Every field is optional.
type Config struct {
	// Driver names the cgroups, the kubelet's --cgroup-driver; it must be
	// the runtime's. Default: the DriverSource's answer, else cgroupfs.
	Driver Driver
	// DriverSource is asked for the runtime's driver at New; when it
	// answers, its driver is used (a different Driver gives a warning
	// event), as the kubelet does with the CRI's RuntimeConfig.
	DriverSource DriverSource
	// CgroupRoot is the cgroup under which kubepods is made, the kubelet's
	// --cgroup-root. Default "/". With systemd a slice path, "/x.slice".
	CgroupRoot string
	// MountPoint is where the cgroup file system is: the cgroup v2 root,
	// or the directory of the v1 hierarchies. Default /sys/fs/cgroup; the
	// version is detected from it.
	MountPoint string
	// Capacity is the node's cpu and memory. Default: the CPU count and
	// MemTotal of /proc/meminfo.
	Capacity v1.ResourceList
	// SystemReserved and KubeReserved are kept from pods, the kubelet's
	// --system-reserved and --kube-reserved; EvictionHard are the hard
	// eviction thresholds (memory.available ...) by resource. All three come
	// off Allocatable.
	SystemReserved, KubeReserved, EvictionHard v1.ResourceList
	// EnforceNodeAllocatable limits the kubepods cgroup to capacity minus
	// SystemReserved and KubeReserved, the kubelet's
	// --enforce-node-allocatable=pods. Default false: kubepods gets the cpu
	// shares of the whole capacity and no memory limit.
	EnforceNodeAllocatable bool
	// PodPidsLimit limits each pod's processes, the kubelet's
	// --pod-max-pids. Default 0: no limit.
	PodPidsLimit int64
	// CPUCFSQuotaPeriod is the CFS period of cpu limits. Default 100ms.
	CPUCFSQuotaPeriod time.Duration
	// NodeName names the node in events.
	NodeName string
	// Recorder receives warning events. Optional.
	Recorder EventRecorder
	// Clock paces the retries of DestroyPod. Default: the real clock.
	Clock clock.Clock
	// Log receives logs. Default logr.Discard().
	Log logr.Logger
}

// Manager places pods in the kubelet's QoS cgroup hierarchy:
//
//	<root>/kubepods/pod<uid>              Guaranteed
//	<root>/kubepods/burstable/pod<uid>    Burstable
//	<root>/kubepods/besteffort/pod<uid>   BestEffort
//
// (with systemd: kubepods.slice/kubepods-burstable.slice/
// kubepods-burstable-pod<uid>.slice). It is safe for concurrent use.
type Manager struct {
	cfg    Config
	driver Driver
	fs     *cgroupFS
	root   Name // kubepods
	period uint64
	log    logr.Logger

	capacity, allocatable v1.ResourceList

	mu        sync.Mutex
	burstable map[types.UID]int64 // cpu requests (milli) of the burstable pods
	shares    uint64              // burstable's cpu.shares last written
}

// New resolves the driver, finds the cgroup file system and makes the
// kubepods, burstable and besteffort cgroups. Where cgroups cannot be
// written it fails with an error wrapping ErrUnavailable.
func New(ctx context.Context, c Config) (*Manager, error) {
	if c.CgroupRoot == "" {
		c.CgroupRoot = "/"
	}
	if c.MountPoint == "" {
		c.MountPoint = defaultMountPoint
	}
	if c.CPUCFSQuotaPeriod == 0 {
		c.CPUCFSQuotaPeriod = 100 * time.Millisecond
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	if c.CPUCFSQuotaPeriod < time.Millisecond || c.CPUCFSQuotaPeriod > time.Second {
		return nil, fmt.Errorf("%w: CPUCFSQuotaPeriod %v not within [1ms, 1s]", ErrInvalidConfig, c.CPUCFSQuotaPeriod)
	}
	if c.PodPidsLimit < 0 {
		return nil, fmt.Errorf("%w: negative PodPidsLimit", ErrInvalidConfig)
	}
	if !filepath.IsAbs(c.CgroupRoot) {
		return nil, fmt.Errorf("%w: CgroupRoot %q is not absolute", ErrInvalidConfig, c.CgroupRoot)
	}
	m := &Manager{cfg: c, log: c.Log, period: uint64(c.CPUCFSQuotaPeriod / time.Microsecond), burstable: map[types.UID]int64{}}
	var err error
	if m.driver, err = m.resolveDriver(ctx); err != nil {
		return nil, err
	}
	if m.driver == DriverSystemd && c.MountPoint == defaultMountPoint && !fileExists("/run/systemd/system") {
		// The runtime cannot make systemd cgroups either: its pods would
		// land outside the hierarchy, or fail to start.
		return nil, fmt.Errorf("%w: cgroup driver systemd, but systemd does not run here (no /run/systemd/system): use cgroupfs, as the runtime must", ErrInvalidConfig)
	}
	m.capacity = c.Capacity
	if m.capacity == nil {
		m.capacity = hostCapacity()
	}
	m.allocatable = Allocatable(m.capacity, c.SystemReserved, c.KubeReserved, c.EvictionHard)
	if goruntime.GOOS != "linux" {
		return nil, fmt.Errorf("cgroups on %s: %w", goruntime.GOOS, ErrUnavailable)
	}
	if m.fs, err = newCgroupFS(c.MountPoint, c.Clock); err != nil {
		return nil, err
	}
	m.root = parseRoot(c.CgroupRoot, m.driver).child(kubepods)
	if err := m.setupQOS(); err != nil {
		return nil, err
	}
	m.log.V(1).Info("QoS cgroups ready", "driver", m.driver, "cgroupVersion", m.fs.version, "kubepods", m.root.Path(m.driver))
	return m, nil
}

func (m *Manager) resolveDriver(ctx context.Context) (Driver, error) {
	d := m.cfg.Driver
	switch d {
	case "", DriverCgroupfs, DriverSystemd:
	default:
		return "", fmt.Errorf("%w: Driver %q: want cgroupfs or systemd", ErrInvalidConfig, d)
	}
	if m.cfg.DriverSource != nil {
		rd, err := m.cfg.DriverSource.CgroupDriver(ctx)
		switch {
		case err != nil:
			m.log.V(1).Info("Runtime does not report its cgroup driver, using the configured one", "driver", d, "err", err)
		case rd != string(DriverCgroupfs) && rd != string(DriverSystemd):
			m.log.Info("Runtime reports an unknown cgroup driver, using the configured one", "runtimeDriver", rd, "driver", d)
		default:
			if d != "" && Driver(rd) != d {
				msg := fmt.Sprintf("cgroup driver %q differs from the runtime's %q; using the runtime's", d, rd)
				m.log.Info(msg)
				if m.cfg.Recorder != nil {
					ref := &v1.ObjectReference{Kind: "Node", Name: m.cfg.NodeName, UID: types.UID(m.cfg.NodeName)}
					m.cfg.Recorder.Eventf(ref, v1.EventTypeWarning, ReasonCgroupDriverMismatch, "%s", msg)
				}
			}
			d = Driver(rd)
		}
	}
	if d == "" {
		d = DriverCgroupfs
	}
	return d, nil
}

// setupQOS makes kubepods and the burstable and besteffort cgroups.
func (m *Manager) setupQOS() error {
	cpu := m.capacity[v1.ResourceCPU]
	shares := MilliCPUToShares(cpu.MilliValue())
	top := Resources{CPUShares: &shares}
	if m.cfg.EnforceNodeAllocatable {
		enforced := Allocatable(m.capacity, m.cfg.SystemReserved, m.cfg.KubeReserved)
		c := enforced[v1.ResourceCPU]
		s := MilliCPUToShares(c.MilliValue())
		top.CPUShares = &s
		if mem, ok := enforced[v1.ResourceMemory]; ok {
			v := mem.Value()
			top.Memory = &v
		}
	}
	if err := m.fs.ensure(m.root.Path(m.driver), top); err != nil {
		return fmt.Errorf("kubepods cgroup: %w", err)
	}
	minShares := uint64(MinShares)
	for _, q := range []v1.PodQOSClass{v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		if err := m.fs.ensure(m.qosCgroup(q).Path(m.driver), Resources{CPUShares: &minShares}); err != nil {
			return fmt.Errorf("%s cgroup: %w", q, err)
		}
	}
	m.shares = MinShares
	return nil
}

func (m *Manager) qosCgroup(q v1.PodQOSClass) Name { return m.root.child(qosName(q)) }

// Driver is the cgroup driver in use.
func (m *Manager) Driver() Driver { return m.driver }

// PodCgroup is the pod's cgroup name (driver-neutral).
func (m *Manager) PodCgroup(pod *v1.Pod) Name {
	return m.qosCgroup(podutil.QOSClass(pod)).child(podName(pod.UID))
}

// EnsurePod makes the pod's cgroup with its limits (PodResources) unless it
// exists, and returns the cgroup parent for the pod's sandbox in the
// driver's form, as the kubelet's pod container manager does before it
// creates a sandbox.
func (m *Manager) EnsurePod(pod *v1.Pod) (string, error) {
	name := m.PodCgroup(pod)
	p := name.Path(m.driver)
	if !m.fs.exists(p) {
		if err := m.fs.ensure(p, PodResources(pod, m.period, m.cfg.PodPidsLimit)); err != nil {
			return "", fmt.Errorf("pod cgroup %s: %w", p, err)
		}
		m.log.V(1).Info("Created pod cgroup", "pod", pod.Namespace+"/"+pod.Name, "cgroup", p)
	}
	if podutil.QOSClass(pod) == v1.PodQOSBurstable {
		req, _ := podTotals(pod, v1.ResourceCPU, false)
		m.updateBurstable(pod.UID, req, true)
	}
	return name.Parent(m.driver), nil
}

// updateBurstable keeps the burstable cgroup's cpu.shares at the sum of its
// pods' requests, as the kubelet's QoS container manager.
func (m *Manager) updateBurstable(uid types.UID, milli int64, add bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if add {
		m.burstable[uid] = milli
	} else {
		delete(m.burstable, uid)
	}
	var sum int64
	for _, v := range m.burstable {
		sum += v
	}
	s := MilliCPUToShares(sum)
	if s == m.shares {
		return
	}
	if err := m.fs.ensure(m.qosCgroup(v1.PodQOSBurstable).Path(m.driver), Resources{CPUShares: &s}); err != nil {
		m.log.Error(err, "Updating the burstable cgroup's cpu shares")
		return
	}
	m.shares = s
}

// DestroyPod kills what is left in the pod's cgroup and removes it (in
// every QoS level, as the pod's class is not needed). A pod without a
// cgroup is no error.
func (m *Manager) DestroyPod(uid types.UID) error {
	var errs []error
	for _, q := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		if err := m.fs.destroy(m.qosCgroup(q).child(podName(uid)).Path(m.driver)); err != nil {
			errs = append(errs, err)
		}
	}
	m.updateBurstable(uid, 0, false)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing the cgroup of pod %s: %w", uid, err)
	}
	return nil
}

// PodUIDs lists the pods that have a cgroup, for removing those of pods
// that are gone.
func (m *Manager) PodUIDs() ([]types.UID, error) {
	var out []types.UID
	for _, q := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		dir := m.qosCgroup(q).Path(m.driver)
		names, err := m.fs.children(dir)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if uid, ok := m.uidOf(n); ok {
				out = append(out, uid)
			}
		}
	}
	return out, nil
}

// uidOf is the pod UID of a pod cgroup's directory name: "pod<uid>", or
// with systemd "<parents>-pod<uid, - escaped as _>.slice".
func (m *Manager) uidOf(dir string) (types.UID, bool) {
	if m.driver != DriverSystemd {
		uid, ok := strings.CutPrefix(dir, "pod")
		return types.UID(uid), ok && uid != ""
	}
	base, ok := strings.CutSuffix(dir, ".slice")
	i := strings.LastIndex(base, "-pod")
	if !ok || i < 0 || i+4 == len(base) {
		return "", false
	}
	return types.UID(strings.ReplaceAll(base[i+4:], "_", "-")), true
}

// Capacity is the node's capacity the Manager works with.
func (m *Manager) Capacity() v1.ResourceList { return m.capacity.DeepCopy() }

// Allocatable is the node allocatable: Capacity minus SystemReserved,
// KubeReserved and EvictionHard.
func (m *Manager) Allocatable() v1.ResourceList { return m.allocatable.DeepCopy() }

// SetNodeAllocatable is a node status setter (it fits node.Setter): it sets
// status.allocatable to the status's capacity minus SystemReserved,
// KubeReserved and EvictionHard, per resource, leaving the capacity's other
// resources (pods) as they are. node.Config's SystemReserved,
// KubeReserved and EvictionHard do the same arithmetic in the node
// controller itself; use one or the other, or the reservations are taken
// twice.
func (m *Manager) SetNodeAllocatable(_ context.Context, status *v1.NodeStatus) error {
	alloc := make(v1.ResourceList, len(status.Capacity))
	for name, q := range status.Allocatable {
		alloc[name] = q.DeepCopy()
	}
	for name, q := range Allocatable(status.Capacity, m.cfg.SystemReserved, m.cfg.KubeReserved, m.cfg.EvictionHard) {
		alloc[name] = q
	}
	status.Allocatable = alloc
	return nil
}

func hostCapacity() v1.ResourceList {
	rl := v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI)}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kb := meminfoTotal(string(b)); kb > 0 {
			rl[v1.ResourceMemory] = *resource.NewQuantity(kb*1024, resource.BinarySI)
		}
	}
	return rl
}
