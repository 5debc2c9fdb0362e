package cm_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/cm"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
)

func rl(cpu, mem string) v1.ResourceList {
	out := v1.ResourceList{}
	if cpu != "" {
		out[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		out[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return out
}

func podWith(uid string, containers ...v1.Container) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID = "p-"+uid, "ns", types.UID(uid)
	p.Spec.Containers = containers
	return p
}

// podLevel is a pod with pod-level requests and limits (spec.resources).
func podLevel(uid string, req, lim v1.ResourceList, containers ...v1.Container) *v1.Pod {
	p := podWith(uid, containers...)
	p.Spec.Resources = &v1.ResourceRequirements{Requests: req, Limits: lim}
	return p
}

func ctr(req, lim v1.ResourceList) v1.Container {
	return v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

var (
	guaranteed = podWith("1234-ab", ctr(rl("500m", "128Mi"), rl("500m", "128Mi")))
	burstable  = podWith("5678-cd", ctr(rl("250m", "64Mi"), rl("1", "")))
	besteffort = podWith("9abc-ef", ctr(nil, nil))
)

func TestPodCgroupNames(t *testing.T) {
	tests := []struct {
		name       string
		driver     cm.Driver
		root       string
		pod        *v1.Pod
		wantPath   string
		wantParent string
	}{
		{"cgroupfs Guaranteed sits in kubepods", cm.DriverCgroupfs, "/", guaranteed, "/kubepods/pod1234-ab", "/kubepods/pod1234-ab"},
		{"cgroupfs Burstable", cm.DriverCgroupfs, "/", burstable, "/kubepods/burstable/pod5678-cd", "/kubepods/burstable/pod5678-cd"},
		{"cgroupfs BestEffort", cm.DriverCgroupfs, "/", besteffort, "/kubepods/besteffort/pod9abc-ef", "/kubepods/besteffort/pod9abc-ef"},
		{"cgroupfs under a cgroup root", cm.DriverCgroupfs, "/nodekit", burstable, "/nodekit/kubepods/burstable/pod5678-cd", "/nodekit/kubepods/burstable/pod5678-cd"},
		{"systemd Guaranteed", cm.DriverSystemd, "/", guaranteed, "/kubepods.slice/kubepods-pod1234_ab.slice", "kubepods-pod1234_ab.slice"},
		{"systemd Burstable escapes dashes", cm.DriverSystemd, "/", burstable,
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5678_cd.slice", "kubepods-burstable-pod5678_cd.slice"},
		{"systemd BestEffort", cm.DriverSystemd, "/", besteffort,
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod9abc_ef.slice", "kubepods-besteffort-pod9abc_ef.slice"},
		{"systemd under a root slice", cm.DriverSystemd, "/nodekit.slice", guaranteed,
			"/nodekit.slice/nodekit-kubepods.slice/nodekit-kubepods-pod1234_ab.slice", "nodekit-kubepods-pod1234_ab.slice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newFakeManager(t, 1, cm.Config{Driver: tt.driver, CgroupRoot: tt.root})
			name := m.PodCgroup(tt.pod)
			require.Equal(t, tt.wantPath, name.Path(tt.driver))
			require.Equal(t, tt.wantParent, name.Parent(tt.driver))
			parent, err := m.EnsurePod(tt.pod)
			require.NoError(t, err)
			require.Equal(t, tt.wantParent, parent)
			uids, err := m.PodUIDs()
			require.NoError(t, err)
			require.Equal(t, []types.UID{tt.pod.UID}, uids, "the UID is read back from the cgroup's name")
		})
	}
}

func TestPodResources(t *testing.T) {
	sidecar := v1.ContainerRestartPolicyAlways
	tests := []struct {
		name   string
		pod    *v1.Pod
		shares uint64
		quota  int64 // 0: not set
		memory int64 // 0: not set
	}{
		{"Guaranteed gets shares, quota and memory limit", guaranteed, 512, 50000, 128 << 20},
		{"Burstable with every cpu limit gets quota but no memory limit", burstable, 256, 100000, 0},
		{"Burstable without limits gets shares only", podWith("b", ctr(rl("100m", ""), nil)), 102, 0, 0},
		{"Burstable with every memory limit gets it", podWith("b", ctr(rl("100m", "32Mi"), rl("", "64Mi")), ctr(nil, rl("", "64Mi"))), 102, 0, 128 << 20},
		{"a container without a limit leaves the pod unlimited", podWith("b", ctr(nil, rl("1", "64Mi")), ctr(rl("1", ""), nil)), 1024, 0, 0},
		{"BestEffort gets the minimal shares", besteffort, 2, 0, 0},
		{"an init container larger than the containers sets the pod's size", func() *v1.Pod {
			p := podWith("i", ctr(rl("1", "1Gi"), rl("1", "1Gi")))
			p.Spec.InitContainers = []v1.Container{ctr(rl("2", "2Gi"), rl("2", "2Gi"))}
			return p
		}(), 2048, 200000, 2 << 30},
		{"sidecars add to the containers", func() *v1.Pod {
			p := podWith("s", ctr(rl("1", "1Gi"), rl("1", "1Gi")))
			s := ctr(rl("500m", "256Mi"), rl("500m", "256Mi"))
			s.RestartPolicy = &sidecar
			p.Spec.InitContainers = []v1.Container{s}
			return p
		}(), 1536, 150000, 1280 << 20},
		{"pod overhead is added", func() *v1.Pod {
			p := podWith("o", ctr(rl("1", "1Gi"), rl("1", "1Gi")))
			p.Spec.Overhead = rl("100m", "64Mi")
			return p
		}(), 1126, 110000, 1088 << 20},
		{"container limits are used when no pod-level resources are set", podWith("n",
			ctr(rl("300m", "100Mi"), rl("300m", "100Mi")), ctr(rl("200m", "28Mi"), rl("200m", "28Mi"))), 512, 50000, 128 << 20},
		{"pod-level limits make a pod Guaranteed", podLevel("g", rl("2", "1Gi"), rl("2", "1Gi"), ctr(nil, nil), ctr(nil, nil)),
			2048, 200000, 1 << 30},
		{"pod-level memory limit is the pod cgroup's memory limit", podLevel("m", rl("1", "512Mi"), rl("1", "512Mi"),
			ctr(rl("250m", "64Mi"), rl("500m", "128Mi"))), 1024, 100000, 512 << 20},
		{"pod-level cpu request is the pod cgroup's cpu shares", podLevel("r", rl("1500m", ""), nil,
			ctr(rl("100m", ""), nil)), 1536, 0, 0},
		{"a Burstable pod's pod-level limits bound it though its containers set none", podLevel("b", rl("500m", "256Mi"), rl("2", "1Gi"),
			ctr(nil, nil)), 512, 200000, 1 << 30},
		{"a resource without a pod-level value takes the containers' total", podLevel("c", rl("", "256Mi"), rl("", "1Gi"),
			ctr(rl("250m", ""), rl("1", "")), ctr(rl("250m", ""), rl("1", ""))), 512, 200000, 1 << 30},
		{"a resource without a pod-level value stays unlimited when a container sets no limit", podLevel("u", rl("", "256Mi"), rl("", "1Gi"),
			ctr(rl("250m", ""), rl("1", "")), ctr(rl("250m", ""), nil)), 512, 0, 1 << 30},
		{"pod overhead is added to pod-level values", func() *v1.Pod {
			p := podLevel("o", rl("1", "1Gi"), rl("1", "1Gi"), ctr(nil, nil))
			p.Spec.Overhead = rl("100m", "64Mi")
			return p
		}(), 1126, 110000, 1088 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cm.PodResources(tt.pod, 100000, 0)
			require.NotNil(t, r.CPUShares)
			require.Equal(t, tt.shares, *r.CPUShares)
			if tt.quota == 0 {
				require.Nil(t, r.CPUQuota)
			} else {
				require.Equal(t, tt.quota, *r.CPUQuota)
				require.EqualValues(t, 100000, *r.CPUPeriod)
			}
			if tt.memory == 0 {
				require.Nil(t, r.Memory)
			} else {
				require.Equal(t, tt.memory, *r.Memory)
			}
			require.Nil(t, r.PidsLimit)
		})
	}
	require.EqualValues(t, 1000, *cm.PodResources(podWith("q", ctr(rl("1m", "1Mi"), rl("1m", "1Mi"))), 100000, 0).CPUQuota,
		"the quota is at least 1ms")
	require.EqualValues(t, 100, *cm.PodResources(besteffort, 100000, 100).PidsLimit)
}

func TestSharesToWeight(t *testing.T) {
	require.EqualValues(t, 1, cm.SharesToWeight(2))
	require.EqualValues(t, 39, cm.SharesToWeight(1024))
	require.EqualValues(t, 10000, cm.SharesToWeight(262144))
}

// newFakeManager lays out a fake cgroup file system of the given version in
// a temp dir and returns a Manager over it.
func newFakeManager(t *testing.T, version int, c cm.Config) (*cm.Manager, string) {
	t.Helper()
	mount := t.TempDir()
	if version == 2 {
		write(t, filepath.Join(mount, "cgroup.controllers"), "cpu memory pids")
	} else {
		for _, h := range []string{"cpu,cpuacct", "memory", "pids", "cpuset"} {
			write(t, filepath.Join(mount, h, "cgroup.procs"), "")
		}
		write(t, filepath.Join(mount, "cpuset", "cpuset.cpus"), "0-1")
		write(t, filepath.Join(mount, "cpuset", "cpuset.mems"), "0")
	}
	c.MountPoint = mount
	if c.Capacity == nil {
		c.Capacity = rl("2", "4Gi")
	}
	m, err := cm.New(context.Background(), c)
	require.NoError(t, err)
	return m, mount
}

func write(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "reading %s", path)
	return strings.TrimSpace(string(b))
}

func TestCgroupFilesV1(t *testing.T) {
	c := cm.Config{EnforceNodeAllocatable: true, SystemReserved: rl("500m", "1Gi"), KubeReserved: rl("", "512Mi"), PodPidsLimit: 1024}
	m, mount := newFakeManager(t, 1, c)
	cpu, mem := filepath.Join(mount, "cpu,cpuacct"), filepath.Join(mount, "memory")
	require.Equal(t, "1536", read(t, filepath.Join(cpu, "kubepods", "cpu.shares")), "kubepods gets the allocatable cpu")
	require.Equal(t, "2684354560", read(t, filepath.Join(mem, "kubepods", "memory.limit_in_bytes")), "4Gi - 1Gi - 512Mi")
	require.Equal(t, "2", read(t, filepath.Join(cpu, "kubepods", "besteffort", "cpu.shares")))
	require.Equal(t, "0-1", read(t, filepath.Join(mount, "cpuset", "kubepods", "burstable", "cpuset.cpus")), "cpuset copied down")

	_, err := m.EnsurePod(guaranteed)
	require.NoError(t, err)
	g := "kubepods/pod1234-ab"
	require.Equal(t, "512", read(t, filepath.Join(cpu, g, "cpu.shares")))
	require.Equal(t, "100000", read(t, filepath.Join(cpu, g, "cpu.cfs_period_us")))
	require.Equal(t, "50000", read(t, filepath.Join(cpu, g, "cpu.cfs_quota_us")))
	require.Equal(t, "134217728", read(t, filepath.Join(mem, g, "memory.limit_in_bytes")))
	require.Equal(t, "1024", read(t, filepath.Join(mount, "pids", g, "pids.max")))

	_, err = m.EnsurePod(burstable)
	require.NoError(t, err)
	require.Equal(t, "256", read(t, filepath.Join(cpu, "kubepods", "burstable", "cpu.shares")), "burstable's shares follow its pods' requests")
	require.NoFileExists(t, filepath.Join(mem, "kubepods", "burstable", "pod5678-cd", "memory.limit_in_bytes"))

	require.NoError(t, m.DestroyPod(burstable.UID))
	require.NoDirExists(t, filepath.Join(cpu, "kubepods", "burstable", "pod5678-cd"))
	require.NoDirExists(t, filepath.Join(mount, "cpuset", "kubepods", "burstable", "pod5678-cd"))
	require.Equal(t, "2", read(t, filepath.Join(cpu, "kubepods", "burstable", "cpu.shares")))
	require.NoError(t, m.DestroyPod("never-there"), "a pod without a cgroup is no error")
}

func TestCgroupFilesV2(t *testing.T) {
	m, mount := newFakeManager(t, 2, cm.Config{})
	_, err := m.EnsurePod(guaranteed)
	require.NoError(t, err)
	g := filepath.Join(mount, "kubepods", "pod1234-ab")
	require.Equal(t, "20", read(t, filepath.Join(g, "cpu.weight")), "512 shares")
	require.Equal(t, "50000 100000", read(t, filepath.Join(g, "cpu.max")))
	require.Equal(t, "134217728", read(t, filepath.Join(g, "memory.max")))
	require.Equal(t, "+pids", read(t, filepath.Join(mount, "kubepods", "cgroup.subtree_control")), "controllers delegated down")
	require.NoFileExists(t, filepath.Join(mount, "kubepods", "memory.max"), "no node allocatable enforcement unless asked")

	_, err = m.EnsurePod(besteffort)
	require.NoError(t, err)
	require.Equal(t, "1", read(t, filepath.Join(mount, "kubepods", "besteffort", "pod9abc-ef", "cpu.weight")))
	require.NoError(t, m.DestroyPod(guaranteed.UID))
	require.NoDirExists(t, g)
}

type driverSource struct {
	driver string
	err    error
}

func (d driverSource) CgroupDriver(context.Context) (string, error) { return d.driver, d.err }

func TestDriverFromTheRuntime(t *testing.T) {
	tests := []struct {
		name       string
		configured cm.Driver
		source     driverSource
		want       cm.Driver
		mismatch   bool
	}{
		{"the runtime's driver is used", "", driverSource{driver: "systemd"}, cm.DriverSystemd, false},
		{"a configured driver that differs gives way with an event", cm.DriverCgroupfs, driverSource{driver: "systemd"}, cm.DriverSystemd, true},
		{"a runtime that cannot tell leaves the configured driver", cm.DriverSystemd, driverSource{err: errors.New("unimplemented")}, cm.DriverSystemd, false},
		{"without either, cgroupfs", "", driverSource{err: errors.New("unimplemented")}, cm.DriverCgroupfs, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &podconfigtest.Recorder{}
			m, _ := newFakeManager(t, 2, cm.Config{Driver: tt.configured, DriverSource: tt.source, Recorder: rec, NodeName: "n1"})
			require.Equal(t, tt.want, m.Driver())
			if tt.mismatch {
				require.Len(t, rec.Events(), 1)
				require.Equal(t, cm.ReasonCgroupDriverMismatch, rec.Events()[0].Reason)
				require.Contains(t, rec.Events()[0].Message, `"cgroupfs" differs from the runtime's "systemd"`)
			} else {
				require.Empty(t, rec.Events())
			}
		})
	}
}

func TestNewFailsClearly(t *testing.T) {
	_, err := cm.New(context.Background(), cm.Config{MountPoint: filepath.Join(t.TempDir(), "none")})
	require.ErrorIs(t, err, cm.ErrUnavailable, "no cgroup file system")
	_, err = cm.New(context.Background(), cm.Config{MountPoint: t.TempDir()})
	require.ErrorIs(t, err, cm.ErrUnavailable, "a directory without hierarchies")
	for name, c := range map[string]cm.Config{
		"unknown driver":     {Driver: "docker"},
		"relative root":      {CgroupRoot: "kubepods"},
		"negative pid limit": {PodPidsLimit: -1},
	} {
		_, err := cm.New(context.Background(), c)
		require.ErrorIs(t, err, cm.ErrInvalidConfig, name)
	}
}

func TestAllocatable(t *testing.T) {
	m, _ := newFakeManager(t, 2, cm.Config{Capacity: rl("4", "8Gi"), SystemReserved: rl("500m", "1Gi"), KubeReserved: rl("500m", "512Mi"),
		EvictionHard: rl("", "100Mi")})
	alloc := m.Allocatable()
	require.Equal(t, "3", ptr.To(alloc[v1.ResourceCPU]).String())
	require.Equal(t, "6556Mi", ptr.To(alloc[v1.ResourceMemory]).String())

	st := &v1.NodeStatus{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"),
		v1.ResourcePods: resource.MustParse("110")}}
	st.Allocatable = st.Capacity
	before := st.Capacity.DeepCopy()
	require.NoError(t, m.SetNodeAllocatable(context.Background(), st))
	require.Equal(t, "3", ptr.To(st.Allocatable[v1.ResourceCPU]).String())
	require.Equal(t, "6556Mi", ptr.To(st.Allocatable[v1.ResourceMemory]).String())
	require.Equal(t, "110", ptr.To(st.Allocatable[v1.ResourcePods]).String())
	require.Equal(t, before, st.Capacity, "the capacity map is not modified")

	over := cm.Allocatable(rl("1", "1Gi"), rl("2", "2Gi"))
	require.Zero(t, ptr.To(over[v1.ResourceCPU]).Sign(), "never below zero")
}

// The node package's status setter takes the allocatable from here.
var _ node.Setter = (*cm.Manager)(nil).SetNodeAllocatable

func TestSystemdDriverWithoutSystemdIsRefused(t *testing.T) {
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("systemd runs here")
	}
	_, err := cm.New(context.Background(), cm.Config{Driver: cm.DriverSystemd})
	require.ErrorIs(t, err, cm.ErrInvalidConfig)
	require.ErrorContains(t, err, "systemd does not run here")
}

func BenchmarkEnsurePodExisting(b *testing.B) {
	mount := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(mount, "cgroup.controllers"), nil, 0o644))
	m, err := cm.New(context.Background(), cm.Config{MountPoint: mount, Capacity: rl("2", "4Gi")})
	require.NoError(b, err)
	_, err = m.EnsurePod(burstable)
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.EnsurePod(burstable); err != nil {
			b.Fatal(err)
		}
	}
}
