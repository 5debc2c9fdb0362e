package node

import (
	"context"
	"maps"
	goruntime "runtime"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Machine is what the host is, as the kubelet reads it from cadvisor's
// MachineInfo and VersionInfo: the capacity's cpu, memory and
// ephemeral-storage, and the nodeInfo's identity. A zero capacity field is
// one not known: the resource is left out of the capacity.
//
// A Machine is a MachineInfo that always answers itself: the static
// source of a simulated node or a test.
type Machine struct {
	// NumCores is the cpu capacity (and what Config.PodsPerCore counts).
	NumCores int
	// MemoryCapacity is the memory capacity in bytes.
	MemoryCapacity int64
	// EphemeralStorageCapacity is the size in bytes of the file system of
	// the node's root directory, the kubelet's RootFsInfo capacity.
	EphemeralStorageCapacity int64
	// MachineID, SystemUUID and BootID are nodeInfo's machineID,
	// systemUUID and bootID.
	MachineID, SystemUUID, BootID string
	// KernelVersion and OSImage are nodeInfo's kernelVersion and osImage.
	KernelVersion, OSImage string
}

// MachineInfo answers m.
func (m Machine) MachineInfo(context.Context) (Machine, error) { return m, nil }

// MachineInfo reads the machine, as cadvisor does for the kubelet. The
// controller calls it on every status computation and on InitialNode, so
// that capacity and nodeInfo follow the host (memory added to a VM, a new
// boot ID); it must be cheap and safe for concurrent use. On an error the
// status reports cpu and memory 0, as the kubelet's.
type MachineInfo interface {
	MachineInfo(ctx context.Context) (Machine, error)
}

// HostMachine reads this host at every call: the CPU count, MemTotal of
// /proc/meminfo, the size of the file system of RootDir (default "/"),
// /etc/machine-id, the DMI product UUID, the boot ID, the kernel release
// and os-release's PRETTY_NAME, each where it can be read. It is
// Config.Machine's default, with Config.RootDir.
type HostMachine struct {
	RootDir string
}

// MachineInfo reads the host; it never fails (what cannot be read is
// left zero).
func (h HostMachine) MachineInfo(context.Context) (Machine, error) {
	dir := h.RootDir
	if dir == "" {
		dir = "/"
	}
	return Machine{
		NumCores:                 goruntime.NumCPU(),
		MemoryCapacity:           memTotal(),
		EphemeralStorageCapacity: fsCapacity(dir),
		MachineID:                readTrimmed("/etc/machine-id"),
		SystemUUID:               readTrimmed("/sys/class/dmi/id/product_uuid"),
		BootID:                   readTrimmed("/proc/sys/kernel/random/boot_id"),
		KernelVersion:            readTrimmed("/proc/sys/kernel/osrelease"),
		OSImage:                  osImage(),
	}, nil
}

// machineResources is the capacity and allocatable of m (with
// Config.Capacity and Allocatable), computed again only when m differs
// from the last machine: the maps are shared with every status until then,
// which only read them.
func (c *Controller) machineResources(m Machine) (capacity, allocatable v1.ResourceList) {
	c.machineMu.Lock()
	defer c.machineMu.Unlock()
	if c.lastMachine != nil && *c.lastMachine == m {
		return c.machineCap, c.machineAlloc
	}
	capacity = c.machineCapacity(m)
	maps.Copy(capacity, c.cfg.Capacity)
	allocatable = c.allocatable(capacity)
	maps.Copy(allocatable, c.cfg.Allocatable)
	c.lastMachine, c.machineCap, c.machineAlloc = &m, capacity, allocatable
	return capacity, allocatable
}

// machineCapacity is m's cpu, memory and ephemeral-storage, each that is
// known, and pods: MaxPods, or PodsPerCore per core if that is fewer (the
// kubelet's MachineInfo setter).
func (c *Controller) machineCapacity(m Machine) v1.ResourceList {
	rl := make(v1.ResourceList, 5)
	if m.NumCores > 0 {
		rl[v1.ResourceCPU] = *resource.NewQuantity(int64(m.NumCores), resource.DecimalSI)
	}
	if m.MemoryCapacity > 0 {
		rl[v1.ResourceMemory] = *resource.NewQuantity(m.MemoryCapacity, resource.BinarySI)
	}
	if m.EphemeralStorageCapacity > 0 {
		rl[v1.ResourceEphemeralStorage] = *resource.NewQuantity(m.EphemeralStorageCapacity, resource.BinarySI)
	}
	rl[v1.ResourcePods] = *resource.NewQuantity(int64(c.maxPods(m.NumCores)), resource.DecimalSI)
	return rl
}

// maxPods is MaxPods, or PodsPerCore×cores when PodsPerCore is set and
// that is fewer.
func (c *Controller) maxPods(cores int) int {
	if c.cfg.PodsPerCore > 0 {
		return min(c.cfg.MaxPods, c.cfg.PodsPerCore*cores)
	}
	return c.cfg.MaxPods
}

// FakeMachine is a MachineInfo whose answer a test or simulation sets
// and changes (memory added, a reboot's new boot ID, an error), counting
// the reads. Safe for concurrent use; the zero value answers a zero
// Machine.
type FakeMachine struct {
	mu    sync.Mutex
	m     Machine
	err   error
	reads int
}

// NewFakeMachine returns a FakeMachine answering m.
func NewFakeMachine(m Machine) *FakeMachine { return &FakeMachine{m: m} }

// Set makes later reads answer m, and no error.
func (f *FakeMachine) Set(m Machine) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m, f.err = m, nil
}

// SetError makes later reads fail with err (nil: answer the machine again).
func (f *FakeMachine) SetError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// Reads is how many times MachineInfo was called.
func (f *FakeMachine) Reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// MachineInfo answers the machine set, or the error.
func (f *FakeMachine) MachineInfo(context.Context) (Machine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return Machine{}, f.err
	}
	return f.m, nil
}
