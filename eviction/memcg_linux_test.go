package eviction_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/eviction"
)

// TestMemcgNotifierOnCgroupV1: a threshold armed on a cgroup v1 memory
// cgroup fires when a process in it uses memory past it. Skipped without
// root or cgroup v1's memory hierarchy (cgroup v2 has no usage
// thresholds).
func TestMemcgNotifierOnCgroupV1(t *testing.T) {
	root := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(root, "cgroup.event_control")); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and the cgroup v1 memory hierarchy at " + root)
	}
	name := fmt.Sprintf("/nodekit-eviction-test-%d", os.Getpid())
	dir := root + name
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skip("cannot make a memory cgroup: ", err)
	}
	shm := filepath.Join("/dev/shm", strings.TrimPrefix(name, "/"))
	t.Cleanup(func() {
		os.Remove(shm)
		for i := 0; i < 50 && os.Remove(dir) != nil; i++ {
			_ = os.WriteFile(filepath.Join(dir, "memory.force_empty"), []byte("0"), 0o600)
			time.Sleep(20 * time.Millisecond)
		}
	})
	b, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	usage, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)

	fired := make(chan struct{}, 1)
	stop, err := eviction.MemcgNotifier{Root: root, PodCgroup: name}.Notify(true, usage+8<<20, func() {
		select {
		case fired <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case <-fired:
		t.Fatal("fired before any use")
	case <-time.After(50 * time.Millisecond):
	}
	// 16MiB of tmpfs pages, charged to the cgroup of the writer.
	cmd := exec.Command("sh", "-c", fmt.Sprintf("echo $$ > %s/cgroup.procs && exec dd if=/dev/zero of=%s bs=1M count=16 2>/dev/null", dir, shm))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification after the cgroup's usage crossed the threshold")
	}
}
