package testenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/cm"
)

// CgroupMount is where the host's cgroups are mounted.
const CgroupMount = "/sys/fs/cgroup"

// CgroupV2 reports whether the host runs the unified (v2) hierarchy.
func CgroupV2() bool {
	_, err := os.Stat(filepath.Join(CgroupMount, "cgroup.controllers"))
	return err == nil
}

// CgroupFile is the host path of a cgroup's file: on v1 in the hierarchy of
// the file's controller (its name's prefix).
func CgroupFile(dir, file string) string {
	if CgroupV2() {
		return filepath.Join(CgroupMount, dir, file)
	}
	controller, _, _ := strings.Cut(file, ".")
	return filepath.Join(CgroupMount, controller, dir, file)
}

// ReadCgroup returns a cgroup file's content without the trailing newline.
func ReadCgroup(t testing.TB, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(CgroupFile(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// CgroupRoot returns a cgroup root of the test's own, /<prefix>-<unique>;
// whatever is made under it is removed, bottom-up in every hierarchy, when
// the test ends.
func CgroupRoot(t testing.TB, prefix string) string {
	root := fmt.Sprintf("/%s-%d", prefix, time.Now().UnixNano())
	t.Cleanup(func() { removeCgroupTree(root) })
	return root
}

// SkipIfNoCgroups skips the test when err is cm.ErrUnavailable (the host's
// cgroups cannot be written: no root, or a read-only /sys/fs/cgroup), and
// fails it instead with CI=true.
func SkipIfNoCgroups(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, cm.ErrUnavailable) {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but cgroups cannot be written here: %v", err)
	}
	t.Skipf("cgroups cannot be written here (needs root and a writable %s): %v", CgroupMount, err)
}

func removeCgroupTree(root string) {
	tops := []string{filepath.Join(CgroupMount, root)}
	if !CgroupV2() {
		entries, _ := os.ReadDir(CgroupMount)
		tops = tops[:0]
		for _, e := range entries {
			tops = append(tops, filepath.Join(CgroupMount, e.Name(), root))
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
