package cm_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodekit/nodekit/cm"
)

// realManager makes a Manager on the host's cgroups under a root of its
// own, removed when the test ends. Where cgroups cannot be written it skips
// (fails with CI=true).
func realManager(t *testing.T, c cm.Config) (*cm.Manager, string) {
	t.Helper()
	c.CgroupRoot = fmt.Sprintf("/nodekit-cmtest-%d", time.Now().UnixNano())
	m, err := cm.New(context.Background(), c)
	t.Cleanup(func() { removeHostTree(c.CgroupRoot) })
	if errors.Is(err, cm.ErrUnavailable) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but cgroups cannot be written here: %v", err)
		}
		t.Skipf("cgroups cannot be written here (needs root and a writable /sys/fs/cgroup): %v", err)
	}
	require.NoError(t, err)
	return m, c.CgroupRoot
}

func hostV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// hostFile is a cgroup file on the host: on v1 in its controller's hierarchy.
func hostFile(dir, file string) string {
	if hostV2() {
		return filepath.Join("/sys/fs/cgroup", dir, file)
	}
	controller, _, _ := strings.Cut(file, ".")
	return filepath.Join("/sys/fs/cgroup", controller, dir, file)
}

func removeHostTree(root string) {
	tops := []string{filepath.Join("/sys/fs/cgroup", root)}
	if !hostV2() {
		entries, _ := os.ReadDir("/sys/fs/cgroup")
		tops = tops[:0]
		for _, e := range entries {
			tops = append(tops, filepath.Join("/sys/fs/cgroup", e.Name(), root))
		}
	}
	for _, top := range tops {
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}

func TestRealNodeAllocatableIsEnforcedOnKubepods(t *testing.T) {
	m, root := realManager(t, cm.Config{Capacity: rl("2", "4Gi"), SystemReserved: rl("500m", "1Gi"), KubeReserved: rl("", "512Mi"),
		EnforceNodeAllocatable: true})
	kubepods := filepath.Join(root, "kubepods")
	if hostV2() {
		require.Equal(t, "2684354560", read(t, hostFile(kubepods, "memory.max")))
		require.Equal(t, "59", read(t, hostFile(kubepods, "cpu.weight")), "1536 shares")
	} else {
		require.Equal(t, "2684354560", read(t, hostFile(kubepods, "memory.limit_in_bytes")))
		require.Equal(t, "1536", read(t, hostFile(kubepods, "cpu.shares")))
	}

	parent, err := m.EnsurePod(guaranteed)
	require.NoError(t, err)
	require.Equal(t, kubepods+"/pod1234-ab", parent)
	if hostV2() {
		require.Equal(t, "134217728", read(t, hostFile(parent, "memory.max")))
		require.Equal(t, "50000 100000", read(t, hostFile(parent, "cpu.max")))
	} else {
		require.Equal(t, "134217728", read(t, hostFile(parent, "memory.limit_in_bytes")))
		require.Equal(t, "50000", read(t, hostFile(parent, "cpu.cfs_quota_us")))
	}
	require.NoError(t, m.DestroyPod(guaranteed.UID))
	require.NoDirExists(t, filepath.Dir(hostFile(parent, "memory.max")))
}
