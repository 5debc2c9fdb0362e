package cri_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/cm"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

type fakeCgroups struct {
	parent    string
	err       error
	destroyed []types.UID
}

func (f *fakeCgroups) EnsurePod(*v1.Pod) (string, error) { return f.parent, f.err }
func (f *fakeCgroups) DestroyPod(uid types.UID) error {
	f.destroyed = append(f.destroyed, uid)
	return nil
}

func TestPodCgroupFailureFailsTheSandbox(t *testing.T) {
	pc := &fakeCgroups{err: errors.New("writing memory.limit_in_bytes: device or resource busy")}
	e := newFakeEnv(t, func(c *cri.Config) { c.PodCgroups = pc })
	res := e.sync(t, newPod("cgfail", "busybox:1"), nil)
	require.ErrorIs(t, res.Error(), runtime.ErrCreatePodSandbox)
	require.ErrorContains(t, res.Error(), "failed to ensure that the pod's cgroups exist")
	require.Zero(t, e.srv.Calls("RunPodSandbox"))
}

func TestKillPodDestroysThePodCgroup(t *testing.T) {
	pc := &fakeCgroups{parent: "/kubepods/besteffort/poduid-cgkill"}
	e := newFakeEnv(t)
	e.m.SetPodCgroups(pc)
	pod := newPod("cgkill", "busybox:1")
	require.NoError(t, e.sync(t, pod, nil).Error())
	require.Empty(t, pc.destroyed)
	st := e.status(t, pod)
	require.NoError(t, e.m.KillPod(e.ctx, pod, st.RunningPod(e.m.Type()), nil))
	require.Equal(t, []types.UID{pod.UID}, pc.destroyed)
}

// A container killed for a failed probe goes alone: the kubelet restarts it
// in the same sandbox. Destroying the pod's cgroup would kill the sandbox
// and every other container (and let garbage collection remove them).
func TestKillContainerLeavesThePodRunning(t *testing.T) {
	pc := &fakeCgroups{parent: "/kubepods/besteffort/poduid-cgone"}
	e := newFakeEnv(t)
	e.m.SetPodCgroups(pc)
	pod := newPod("cgone", "busybox:1", func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "other", Image: "busybox:1", Command: []string{"sleep", "3600"}})
	})
	require.NoError(t, e.sync(t, pod, nil).Error())
	st := e.status(t, pod)
	main := st.FindContainerStatusByName("main")
	require.NotNil(t, main)

	require.NoError(t, e.m.KillContainer(e.ctx, pod, runtime.Container{ID: main.ID, Name: main.Name}, nil))
	require.Empty(t, pc.destroyed, "the pod's cgroup must stay")
	st = e.status(t, pod)
	require.Equal(t, runtime.ContainerStateExited, st.FindContainerStatusByName("main").State)
	require.Equal(t, runtime.ContainerStateRunning, st.FindContainerStatusByName("other").State)
	require.NotNil(t, st.ReadySandbox(), "the sandbox must stay ready")

	// The next sync restarts it in the same sandbox, one restart more.
	require.NoError(t, e.sync(t, pod, nil).Error())
	st2 := e.status(t, pod)
	again := st2.FindContainerStatusByName("main")
	require.Equal(t, runtime.ContainerStateRunning, again.State)
	require.Equal(t, main.RestartCount+1, again.RestartCount)
	require.Equal(t, st.ReadySandbox().ID, st2.ReadySandbox().ID)

	require.ErrorIs(t, e.m.KillContainer(e.ctx, nil, runtime.Container{ID: again.ID, Name: "main"}, nil), runtime.ErrInvalidConfig)
}

func TestCgroupDriverFromRuntimeConfig(t *testing.T) {
	e := newFakeEnv(t)
	for want, driver := range map[string]runtimeapi.CgroupDriver{"cgroupfs": runtimeapi.CgroupDriver_CGROUPFS, "systemd": runtimeapi.CgroupDriver_SYSTEMD} {
		e.srv.Runtime.Lock()
		e.srv.Runtime.FakeLinuxConfiguration = &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: driver}
		e.srv.Runtime.Unlock()
		d, err := e.m.CgroupDriver(e.ctx)
		require.NoError(t, err)
		require.Equal(t, want, d)
	}
}

// processesUnder lists the pids in the cgroups below dir (the sandbox's
// and the containers').
func processesUnder(t *testing.T, dir string) []string {
	t.Helper()
	top := filepath.Join(testenv.CgroupMount, dir)
	if !testenv.CgroupV2() {
		top = filepath.Join(testenv.CgroupMount, "memory", dir)
	}
	var pids []string
	require.NoError(t, filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		b, err := os.ReadFile(p)
		pids = append(pids, strings.Fields(string(b))...)
		return err
	}))
	return pids
}

func TestRealPodsLandInTheirQoSCgroups(t *testing.T) {
	m, image, logs := realManager(t)
	ctx := context.Background()
	root := testenv.CgroupRoot(t, "nodekit-test")
	cgm, err := cm.New(ctx, cm.Config{CgroupRoot: root, DriverSource: m})
	testenv.SkipIfNoCgroups(t, err)
	require.NoError(t, err)
	require.Equal(t, cm.DriverCgroupfs, cgm.Driver(), "the test containerd runs runc with SystemdCgroup=false")
	m.SetPodCgroups(cgm)

	res := func(cpu, mem string) v1.ResourceList {
		out := v1.ResourceList{}
		if cpu != "" {
			out[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			out[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return out
	}
	v2 := testenv.CgroupV2()
	tests := []struct {
		name     string
		req, lim v1.ResourceList
		qosDir   string
		files    map[string]string // v1 file: value
		filesV2  map[string]string
	}{
		{"cgqos-guaranteed", res("200m", "64Mi"), res("200m", "64Mi"), "kubepods",
			map[string]string{"cpu.shares": "204", "cpu.cfs_quota_us": "20000", "cpu.cfs_period_us": "100000", "memory.limit_in_bytes": "67108864"},
			map[string]string{"cpu.weight": "8", "cpu.max": "20000 100000", "memory.max": "67108864"}},
		{"cgqos-burstable", res("100m", "32Mi"), res("300m", ""), "kubepods/burstable",
			map[string]string{"cpu.shares": "102", "cpu.cfs_quota_us": "30000"},
			map[string]string{"cpu.weight": "4", "cpu.max": "30000 100000", "memory.max": "max"}},
		{"cgqos-besteffort", nil, nil, "kubepods/besteffort",
			map[string]string{"cpu.shares": "2", "cpu.cfs_quota_us": "-1"},
			map[string]string{"cpu.weight": "1", "cpu.max": "max 100000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := realPod(tt.name, image, func(p *v1.Pod) {
				p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: tt.req, Limits: tt.lim}
				p.Spec.Containers[0].Command = []string{"sh", "-c", "cat /proc/self/cgroup; exec sleep 3600"}
			})
			cleanup(t, m, pod)
			syncUntil(t, ctx, m, pod, nil, 50, 100*time.Millisecond, running("main"))
			dir := filepath.Join(root, tt.qosDir, "pod"+string(pod.UID))
			files := tt.files
			if v2 {
				files = tt.filesV2
			}
			for file, want := range files {
				require.Equal(t, want, testenv.ReadCgroup(t, dir, file), file)
			}
			require.NotEmpty(t, processesUnder(t, dir), "the pod's processes run inside its cgroup")
			if !v2 { // v2 containers may have their own cgroup namespace
				var out string
				require.Eventually(t, func() bool {
					b, err := os.ReadFile(filepath.Join(logDir(logs, pod), "main", "0.log"))
					out = string(b)
					return err == nil && strings.Contains(out, ":/")
				}, logWait, 50*time.Millisecond)
				require.Contains(t, out, dir+"/", "the container sees itself inside the pod cgroup")
			}

			st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
			require.NoError(t, err)
			require.NoError(t, m.KillPod(ctx, pod, st.RunningPod(m.Type()), nil))
			_, err = os.Stat(testenv.CgroupFile(dir, "cpu.shares"))
			if v2 {
				_, err = os.Stat(testenv.CgroupFile(dir, "cpu.weight"))
			}
			require.ErrorIs(t, err, fs.ErrNotExist, "the pod cgroup is gone after the pod is killed")
		})
	}
}

type listingCgroups struct {
	fakeCgroups
	uids []types.UID
}

func (l *listingCgroups) PodUIDs() ([]types.UID, error) { return l.uids, nil }

func TestGarbageCollectRemovesCgroupsOfPodsWithoutSandbox(t *testing.T) {
	pc := &listingCgroups{uids: []types.UID{"uid-cglive", "uid-gone"}}
	e := newFakeEnv(t, func(c *cri.Config) { c.PodCgroups = pc })
	require.NoError(t, e.sync(t, newPod("cglive", "busybox:1"), nil).Error())
	policy := runtime.GCPolicy{MaxPerPodContainer: -1, MaxContainers: -1}

	require.NoError(t, e.m.GarbageCollect(e.ctx, policy, false))
	require.Empty(t, pc.destroyed, "nothing is an orphan before every source is ready")
	require.NoError(t, e.m.GarbageCollect(e.ctx, policy, true))
	require.Equal(t, []types.UID{"uid-gone"}, pc.destroyed, "the pod with a sandbox keeps its cgroup")
}
