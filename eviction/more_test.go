package eviction_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/eviction"
)

// diskInfo is a scripted DiskInfo.
type diskInfo struct {
	dedicated, split bool
	err              error
}

func (d diskInfo) HasDedicatedImageFs(context.Context) (bool, error) { return d.dedicated, d.err }
func (d diskInfo) IsContainerFsSeparateFromImageFs(context.Context) bool {
	return d.split
}

func TestReclaimByFileSystemLayout(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		disk                  diskInfo
		hard                  string
		setup                 func(n *node)
		wantImages, wantConts int
	}{
		{"one file system: nodefs reclaims containers and images", diskInfo{}, "nodefs.available<10Gi",
			func(n *node) { n.nodeFs.avail = gi }, 1, 1},
		{"dedicated imagefs: nodefs reclaims nothing", diskInfo{dedicated: true}, "nodefs.available<10Gi",
			func(n *node) { n.nodeFs.avail = gi }, 0, 0},
		{"dedicated imagefs: imagefs reclaims containers and images", diskInfo{dedicated: true}, "imagefs.available<10Gi",
			func(n *node) { n.imageFs.avail = gi }, 1, 1},
		{"split image and container file systems: imagefs reclaims images", diskInfo{dedicated: true, split: true}, "imagefs.available<10Gi",
			func(n *node) { n.imageFs.avail = gi }, 1, 0},
		{"split image and container file systems: nodefs reclaims containers", diskInfo{dedicated: true, split: true}, "nodefs.available<10Gi",
			func(n *node) { n.nodeFs.avail = gi }, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, eviction.Config{Thresholds: thresholds(t, tc.hard, "", "", ""), DiskInfo: tc.disk}, podSpec{name: "p", rootfs: gi})
			e.node.set(tc.setup)
			require.Len(t, e.sync(t, 0), 1, "the reclaim frees nothing: a pod goes")
			assert.Equal(t, tc.wantImages, e.gc.images, "image GC runs")
			assert.Equal(t, tc.wantConts, e.gc.container, "container GC runs")
		})
	}
}

func TestDiskInfoErrorFailsThePass(t *testing.T) {
	e := newEnv(t, eviction.Config{DiskInfo: diskInfo{err: errors.New("no cadvisor")}})
	_, err := e.m.Synchronize(context.Background())
	assert.Error(t, err)
}

func TestAllocatableMemoryAvailable(t *testing.T) {
	ts, err := eviction.ParseThresholdConfig(true, map[string]string{"memory.available": "100Mi"}, nil, nil, nil)
	require.NoError(t, err)
	e := newEnv(t, eviction.Config{Thresholds: ts}, memoryPods...)
	// The node has memory; the pods cgroup does not.
	e.node.sysPods = &statsapi.ContainerStats{Name: statsapi.SystemContainerPods,
		Memory: &statsapi.MemoryStats{AvailableBytes: ptr.To(uint64(50 * mi)), WorkingSetBytes: ptr.To(uint64(1600 * mi))}}
	got := e.sync(t, 0)
	require.Len(t, got, 1)
	assert.Equal(t, "burstable", got[0].Name)
	assert.True(t, e.m.MemoryPressure())
	assert.Contains(t, e.kill.last().opts.Message, "Threshold quantity: 100Mi, available: 50Mi.")
}

func TestNoActivePodsEvictsNothing(t *testing.T) {
	e := newEnv(t, eviction.Config{Thresholds: thresholds(t, "memory.available<1Gi", "", "", "")})
	e.node.memAvail = 100 * mi
	assert.Empty(t, e.sync(t, 0))
	assert.True(t, e.m.MemoryPressure(), "pressure is reported all the same")
}

func TestKillErrorStillCountsAsEviction(t *testing.T) {
	e := newEnv(t, eviction.Config{Thresholds: thresholds(t, "memory.available<1Gi", "", "", "")}, memoryPods...)
	e.kill.err = errors.New("did not stop in time")
	e.node.memAvail = 100 * mi
	assert.Len(t, e.sync(t, 0), 1, "as the kubelet's: the pod was asked to go")
}
