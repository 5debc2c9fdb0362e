package cm_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodekit/nodekit/cm"
	"github.com/nodekit/nodekit/internal/testenv"
)

// realManager makes a Manager on the host's cgroups under a root of its
// own, removed when the test ends. Where cgroups cannot be written it skips
// (fails with CI=true).
func realManager(t *testing.T, c cm.Config) (*cm.Manager, string) {
	t.Helper()
	c.CgroupRoot = testenv.CgroupRoot(t, "nodekit-cmtest")
	m, err := cm.New(context.Background(), c)
	testenv.SkipIfNoCgroups(t, err)
	require.NoError(t, err)
	return m, c.CgroupRoot
}

func TestRealNodeAllocatableIsEnforcedOnKubepods(t *testing.T) {
	m, root := realManager(t, cm.Config{Capacity: rl("2", "4Gi"), SystemReserved: rl("500m", "1Gi"), KubeReserved: rl("", "512Mi"),
		EnforceNodeAllocatable: true})
	kubepods := filepath.Join(root, "kubepods")
	if testenv.CgroupV2() {
		require.Equal(t, "2684354560", testenv.ReadCgroup(t, kubepods, "memory.max"))
		require.Equal(t, "59", testenv.ReadCgroup(t, kubepods, "cpu.weight"), "1536 shares")
	} else {
		require.Equal(t, "2684354560", testenv.ReadCgroup(t, kubepods, "memory.limit_in_bytes"))
		require.Equal(t, "1536", testenv.ReadCgroup(t, kubepods, "cpu.shares"))
	}

	parent, err := m.EnsurePod(guaranteed)
	require.NoError(t, err)
	require.Equal(t, kubepods+"/pod1234-ab", parent)
	if testenv.CgroupV2() {
		require.Equal(t, "134217728", testenv.ReadCgroup(t, parent, "memory.max"))
		require.Equal(t, "50000 100000", testenv.ReadCgroup(t, parent, "cpu.max"))
	} else {
		require.Equal(t, "134217728", testenv.ReadCgroup(t, parent, "memory.limit_in_bytes"))
		require.Equal(t, "50000", testenv.ReadCgroup(t, parent, "cpu.cfs_quota_us"))
	}
	require.NoError(t, m.DestroyPod(guaranteed.UID))
	require.NoDirExists(t, filepath.Dir(testenv.CgroupFile(parent, "memory.max")))
}
