package stats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cgroupSample is what one cgroup tells: cumulative CPU time and memory,
// nil where the cgroup lacks the file.
type cgroupSample struct {
	cpuNanos                                    *uint64
	usage, workingSet, rss, pgfault, pgmajfault *uint64
	limit                                       *uint64 // nil: unlimited
	pids                                        *uint64
	swapUsage                                   *uint64
}

// cgroups reads cgroup v1 or v2 under mount (/sys/fs/cgroup).
type cgroups struct {
	mount string
	v2    bool
}

func newCgroups(mount string) cgroups {
	_, err := os.Stat(filepath.Join(mount, "cgroup.controllers"))
	return cgroups{mount: mount, v2: err == nil}
}

// dir is the directory of cgroup path p in controller's hierarchy.
func (c cgroups) dir(controller, p string) string {
	if c.v2 {
		return filepath.Join(c.mount, p)
	}
	if controller == "cpuacct" {
		// Some hosts mount cpu and cpuacct together as "cpu,cpuacct" with
		// cpuacct a link to it; either name works where it exists.
		if _, err := os.Stat(filepath.Join(c.mount, "cpuacct")); err != nil {
			return filepath.Join(c.mount, "cpu,cpuacct", p)
		}
	}
	return filepath.Join(c.mount, controller, p)
}

// exists reports whether cgroup p exists (in the memory hierarchy on v1).
func (c cgroups) exists(p string) bool {
	_, err := os.Stat(c.dir("memory", p))
	return err == nil
}

// read samples cgroup p; a cgroup that does not exist gives an error
// wrapping fs.ErrNotExist.
func (c cgroups) read(p string) (cgroupSample, error) {
	var s cgroupSample
	if !c.exists(p) {
		return s, fmt.Errorf("cgroup %q: %w", p, fs.ErrNotExist)
	}
	if c.v2 {
		d := c.dir("", p)
		if kv, err := readKV(filepath.Join(d, "cpu.stat")); err == nil {
			if v, ok := kv["usage_usec"]; ok {
				s.cpuNanos = ptr(v * 1000)
			}
		}
		s.usage = readUint(filepath.Join(d, "memory.current"))
		if kv, err := readKV(filepath.Join(d, "memory.stat")); err == nil {
			s.setMemory(kv, "inactive_file", "anon", "pgfault", "pgmajfault")
		}
		s.limit = readUint(filepath.Join(d, "memory.max")) // "max" parses to nil
		s.pids = readUint(filepath.Join(d, "pids.current"))
		s.swapUsage = readUint(filepath.Join(d, "memory.swap.current"))
		return s, nil
	}
	s.cpuNanos = readUint(filepath.Join(c.dir("cpuacct", p), "cpuacct.usage"))
	md := c.dir("memory", p)
	s.usage = readUint(filepath.Join(md, "memory.usage_in_bytes"))
	if kv, err := readKV(filepath.Join(md, "memory.stat")); err == nil {
		s.setMemory(kv, "total_inactive_file", "total_rss", "total_pgfault", "total_pgmajfault")
	}
	if l := readUint(filepath.Join(md, "memory.limit_in_bytes")); l != nil && !unlimited(*l) {
		s.limit = l
	}
	s.pids = readUint(filepath.Join(c.dir("pids", p), "pids.current"))
	return s, nil
}

// setMemory derives the working set as cadvisor does: usage less the
// inactive file pages the kernel reclaims first.
func (s *cgroupSample) setMemory(kv map[string]uint64, inactive, rss, pgfault, pgmajfault string) {
	if s.usage != nil {
		ws := *s.usage
		if in, ok := kv[inactive]; ok {
			ws -= min(in, ws)
		}
		s.workingSet = &ws
	}
	if v, ok := kv[rss]; ok {
		s.rss = ptr(v)
	}
	if v, ok := kv[pgfault]; ok {
		s.pgfault = ptr(v)
	}
	if v, ok := kv[pgmajfault]; ok {
		s.pgmajfault = ptr(v)
	}
}

// unlimited is cadvisor's isMemoryUnlimited: the kernel's "no limit"
// rounded down to a page.
func unlimited(v uint64) bool { return v > 1<<62 }

// findPodCgroups maps pod UIDs to their cgroups under root (the kubepods
// cgroup), looking two levels down (kubepods/pod<uid>,
// kubepods/burstable/pod<uid>) for a cgroupfs "pod<uid>" or a systemd
// "...-pod<uid with _>.slice" directory.
func (c cgroups) findPodCgroups(root string) map[string]string {
	out := map[string]string{}
	var walk func(p string, depth int)
	walk = func(p string, depth int) {
		entries, err := os.ReadDir(c.dir("memory", p))
		if err != nil {
			return
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			name, child := e.Name(), filepath.Join(p, e.Name())
			if uid, ok := podUIDOfCgroup(name); ok {
				out[uid] = child
			} else if depth < 2 {
				walk(child, depth+1)
			}
		}
	}
	walk(root, 1)
	return out
}

func podUIDOfCgroup(name string) (string, bool) {
	if uid, ok := strings.CutPrefix(name, "pod"); ok && uid != "" {
		return uid, true
	}
	if rest, ok := strings.CutSuffix(name, ".slice"); ok {
		if i := strings.LastIndex(rest, "-pod"); i >= 0 && i+4 < len(rest) {
			return strings.ReplaceAll(rest[i+4:], "_", "-"), true
		}
	}
	return "", false
}

// containerCgroup is the cgroup of container id inside its pod's cgroup:
// cgroupfs names it by ID, systemd as a scope of the runtime's
// (cri-containerd-<id>.scope, crio-<id>.scope).
func (c cgroups) containerCgroup(pod, id string) (string, bool) {
	for _, name := range []string{id, "cri-containerd-" + id + ".scope", "crio-" + id + ".scope", "docker-" + id + ".scope"} {
		p := filepath.Join(pod, name)
		if c.exists(p) {
			return p, true
		}
	}
	return "", false
}

// meminfo is /proc/meminfo in bytes.
func readMeminfo(procRoot string) (map[string]uint64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		out[k] = n
	}
	if _, ok := out["MemTotal"]; !ok {
		return nil, fmt.Errorf("%s/meminfo: no MemTotal", procRoot)
	}
	return out, nil
}

// userHZ is the kernel's clock tick for /proc/stat, 100 on every Linux
// architecture Kubernetes runs on.
const userHZ = 100

// procStat reads the boot time and the total CPU time from /proc/stat.
func procStat(procRoot string) (boot time.Time, cpuNanos *uint64, err error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "stat"))
	if err != nil {
		return time.Time{}, nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "btime":
			if s, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				boot = time.Unix(s, 0)
			}
		case "cpu":
			// user nice system idle iowait irq softirq steal: all but
			// idle and iowait are busy.
			var ticks uint64
			for i, v := range f[1:min(len(f), 9)] {
				if i == 3 || i == 4 {
					continue
				}
				n, _ := strconv.ParseUint(v, 10, 64)
				ticks += n
			}
			cpuNanos = ptr(ticks * uint64(time.Second/userHZ))
		}
	}
	if boot.IsZero() {
		return boot, cpuNanos, fmt.Errorf("%s/stat: no btime", procRoot)
	}
	return boot, cpuNanos, nil
}

// rlimit is the kubelet's pidlimit.Stats: the smaller of pid_max and
// threads-max, and the number of tasks from /proc/loadavg.
func rlimit(procRoot string) (maxPID, procs *int64) {
	for _, f := range []string{"sys/kernel/pid_max", "sys/kernel/threads-max"} {
		b, err := os.ReadFile(filepath.Join(procRoot, f))
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && (maxPID == nil || n < *maxPID) {
			maxPID = &n
		}
	}
	// "0.08 0.03 0.01 2/3518 3715089": running/total tasks.
	if b, err := os.ReadFile(filepath.Join(procRoot, "loadavg")); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 4 {
			if _, total, ok := strings.Cut(f[3], "/"); ok {
				if n, err := strconv.ParseInt(total, 10, 64); err == nil {
					procs = &n
				}
			}
		}
	}
	return maxPID, procs
}

// dirUsage is the bytes and inodes under dir, as the kubelet's du of log
// directories; a missing dir gives an error wrapping fs.ErrNotExist.
func dirUsage(dir string) (bytes, inodes uint64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && bytes+inodes > 0 {
				return nil // removed while walking
			}
			return err
		}
		inodes++
		if info, err := d.Info(); err == nil && d.Type().IsRegular() {
			bytes += uint64(info.Size())
		}
		return nil
	})
	return bytes, inodes, err
}

func readUint(path string) *uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return nil
	}
	return &n
}

func readKV(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }
