package cm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// cgroupFS reads and writes cgroups through the cgroup file system, v2 or
// v1. Cgroups are made by directory and limited by file, as the kubelet's
// cgroupfs manager does (its systemd manager asks systemd over D-Bus
// instead; here systemd-named cgroups are made in the file system too).
type cgroupFS struct {
	version int
	// roots are the hierarchies: the v2 root, or each v1 hierarchy.
	roots []string
	// primary is the hierarchy whose directories tell what exists.
	primary string
	clock   clock.Clock
}

func newCgroupFS(mount string, clk clock.Clock) (*cgroupFS, error) {
	f := &cgroupFS{clock: clk}
	if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err == nil {
		f.version, f.roots, f.primary = 2, []string{mount}, mount
		return f, nil
	}
	entries, err := os.ReadDir(mount)
	if err != nil {
		return nil, fmt.Errorf("no cgroup file system at %s: %v: %w", mount, err, ErrUnavailable)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		dir := filepath.Join(mount, e.Name())
		real, err := filepath.EvalSymlinks(dir)
		if err != nil || seen[real] {
			continue
		}
		if _, err := os.Stat(filepath.Join(real, "cgroup.procs")); err != nil {
			continue
		}
		seen[real] = true
		f.roots = append(f.roots, dir)
		if e.Name() == "memory" || (f.primary == "" && e.Name() == "cpu") {
			f.primary = dir
		}
	}
	if f.primary == "" {
		return nil, fmt.Errorf("no cgroup v2 root nor v1 cpu or memory hierarchy at %s: %w", mount, ErrUnavailable)
	}
	f.version = 1
	return f, nil
}

func (f *cgroupFS) exists(p string) bool {
	_, err := os.Stat(filepath.Join(f.primary, p))
	return err == nil
}

// unavailable marks errors that mean "cgroups cannot be written here".
func unavailable(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// ensure makes cgroup p in every hierarchy and writes r.
func (f *cgroupFS) ensure(p string, r Resources) error {
	for _, root := range f.roots {
		if f.version == 2 {
			f.enableControllers(root, p)
		}
		if err := f.mkdir(root, p); err != nil {
			return unavailable(err)
		}
	}
	return f.write(p, r)
}

// mkdir makes root/p and its missing parents; cpuset directories of v1
// get their parent's cpus and mems, without which nothing can join them.
func (f *cgroupFS) mkdir(root, p string) error {
	cpuset := f.version == 1 && fileExists(filepath.Join(root, "cpuset.cpus"))
	dir := root
	for _, c := range strings.Split(strings.Trim(p, "/"), "/") {
		parent := dir
		dir = filepath.Join(dir, c)
		if err := os.Mkdir(dir, 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return err
		}
		if cpuset {
			for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
				if b, err := os.ReadFile(filepath.Join(parent, file)); err == nil {
					_ = os.WriteFile(filepath.Join(dir, file), b, 0o644)
				}
			}
		}
	}
	return nil
}

// enableControllers turns cpu, memory and pids on for the children of
// every ancestor of p (cgroup v2 only delegates what the parent enables).
// A controller the parent lacks is left out; writing its limit fails later.
func (f *cgroupFS) enableControllers(root, p string) {
	dir := root
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i := 0; i < len(parts); i++ {
		for _, c := range []string{"+cpu", "+memory", "+pids"} {
			_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(c), 0o644)
		}
		dir = filepath.Join(dir, parts[i])
		if !fileExists(dir) {
			_ = os.Mkdir(dir, 0o755)
		}
	}
}

type setting struct{ file, value string }

func (f *cgroupFS) settings(r Resources) []setting {
	var out []setting
	if f.version == 2 {
		if r.CPUShares != nil {
			out = append(out, setting{"cpu.weight", strconv.FormatUint(SharesToWeight(*r.CPUShares), 10)})
		}
		if r.CPUQuota != nil {
			period := uint64(defaultPeriod)
			if r.CPUPeriod != nil {
				period = *r.CPUPeriod
			}
			q := "max"
			if *r.CPUQuota > 0 {
				q = strconv.FormatInt(*r.CPUQuota, 10)
			}
			out = append(out, setting{"cpu.max", q + " " + strconv.FormatUint(period, 10)})
		}
		if r.Memory != nil {
			out = append(out, setting{"memory.max", limitValue(*r.Memory)})
		}
	} else {
		if r.CPUShares != nil {
			out = append(out, setting{"cpu.shares", strconv.FormatUint(*r.CPUShares, 10)})
		}
		if r.CPUPeriod != nil {
			out = append(out, setting{"cpu.cfs_period_us", strconv.FormatUint(*r.CPUPeriod, 10)})
		}
		if r.CPUQuota != nil {
			q := *r.CPUQuota
			if q <= 0 {
				q = -1
			}
			out = append(out, setting{"cpu.cfs_quota_us", strconv.FormatInt(q, 10)})
		}
		if r.Memory != nil {
			v := *r.Memory
			if v <= 0 {
				v = -1
			}
			out = append(out, setting{"memory.limit_in_bytes", strconv.FormatInt(v, 10)})
		}
	}
	if r.PidsLimit != nil {
		out = append(out, setting{"pids.max", limitValue(*r.PidsLimit)})
	}
	return out
}

func limitValue(v int64) string {
	if v <= 0 {
		return "max"
	}
	return strconv.FormatInt(v, 10)
}

// write writes r into cgroup p: on v1 in the hierarchy of each file's
// controller (cpu, memory, pids).
func (f *cgroupFS) write(p string, r Resources) error {
	for _, s := range f.settings(r) {
		controller, _, _ := strings.Cut(s.file, ".")
		written := false
		for _, root := range f.roots {
			if f.version == 1 && !hasController(filepath.Base(root), controller) {
				continue
			}
			file := filepath.Join(root, p, s.file)
			if err := os.WriteFile(file, []byte(s.value), 0o644); err != nil {
				return unavailable(fmt.Errorf("writing %s to %s: %w", s.value, file, err))
			}
			written = true
		}
		if !written {
			return fmt.Errorf("no cgroup hierarchy with the %s controller for %s: %w", controller, s.file, ErrUnavailable)
		}
	}
	return nil
}

// hasController reports whether a v1 hierarchy named like "cpu,cpuacct"
// holds controller.
func hasController(hierarchy, controller string) bool {
	for _, c := range strings.Split(hierarchy, ",") {
		if c == controller {
			return true
		}
	}
	return false
}

// children lists the cgroups directly under p.
func (f *cgroupFS) children(p string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(f.primary, p))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// destroy removes cgroup p and its children from every hierarchy, killing
// the processes still in them (as the kubelet's pod container manager does
// for a pod that is gone), retrying while the kernel is still releasing
// them.
func (f *cgroupFS) destroy(p string) error {
	base := filepath.Base(p)
	if !strings.Contains(strings.Trim(p, "/"), "/") || !(strings.HasPrefix(base, "pod") || strings.Contains(base, "-pod")) {
		// destroy kills what it finds: only ever a pod's cgroup.
		return fmt.Errorf("refusing to destroy %q, not a pod cgroup", p)
	}
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if attempt > 0 {
			f.clock.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
		}
		if err = f.removeOnce(p); err == nil {
			return nil
		}
	}
	return err
}

func (f *cgroupFS) removeOnce(p string) error {
	var dirs []string
	for _, root := range f.roots {
		top := filepath.Join(root, p)
		_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	for _, d := range dirs {
		killProcs(filepath.Join(d, "cgroup.procs"))
	}
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- { // children before parents
		if err := rmdir(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rmdir removes a cgroup directory. A cgroup's interface files do not keep
// it from going; plain files do (a cgroup tree imitated in a temporary
// directory), and go first.
func rmdir(dir string) error {
	err := os.Remove(dir)
	if !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		return err
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Type().IsRegular() {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return os.Remove(dir)
}

func killProcs(procs string) {
	b, err := os.ReadFile(procs)
	if err != nil {
		return
	}
	for _, line := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(line); err == nil && pid > 0 {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// meminfoTotal is MemTotal of /proc/meminfo's text, in kB, or 0.
func meminfoTotal(s string) int64 {
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
