package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// uniqueNode is a node name starting with prefix that no other run shares,
// so pods on the shared containerd do not collide.
func uniqueNode(prefix string) string {
	return prefix + strconv.FormatInt(time.Now().UnixNano()%1_000_000, 36)
}

// ourPods lists the runtime's pods (every sandbox and container, running or
// not) that belong to node.
func ourPods(t *testing.T, m *cri.Manager, node string) []*runtime.Pod {
	t.Helper()
	pods, err := m.GetPods(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	var out []*runtime.Pod
	for _, p := range pods {
		if strings.HasSuffix(p.Name, "-"+node) {
			out = append(out, p)
		}
	}
	return out
}

// TestStandaloneOnContainerd runs the program against the containerd of
// hack/containerd.sh: real commands, exit codes and restarts in the status,
// and nothing of its pods left on the runtime after shutdown. The agent
// kills pods it does not know, so it takes the runtime for itself.
func TestStandaloneOnContainerd(t *testing.T) {
	endpoint := testenv.ExclusiveCRIEndpoint(t)
	image, pause := testenv.TestImage(t), testenv.PauseImage(t)
	node := uniqueNode("standalone-e2e-")

	dir := t.TempDir()
	manifests := map[string]string{
		"web.yaml": `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 5
  initContainers:
  - {name: setup, image: IMAGE, command: [sh, -c, "echo ready > /work/ready"], volumeMounts: [{name: work, mountPath: /work}]}
  containers:
  - {name: web, image: IMAGE, command: [sh, -c, "trap 'exit 0' TERM; cat /work/ready /etc/resolv.conf; while true; do sleep 1; done"], volumeMounts: [{name: work, mountPath: /work}]}
  volumes: [{name: work, emptyDir: {}}]
`,
		"crash.yaml": `apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  containers:
  - {name: crash, image: IMAGE, command: [sh, -c, "echo crashing; exit 3"]}
`,
		"job.yaml": `apiVersion: v1
kind: Pod
metadata: {name: job}
spec:
  restartPolicy: Never
  containers:
  - {name: job, image: IMAGE, command: [sh, -c, "echo done"]}
`,
	}
	for name, m := range manifests {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(m, "IMAGE", image)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logs, state := t.TempDir(), t.TempDir()
	m, err := cri.New(context.Background(), cri.Config{Endpoint: endpoint, PodLogsRoot: logs, PodsRoot: state})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	began := time.Now()
	args := []string{"-cri", endpoint, "-pause-image", pause, "-pod-manifest-path", dir, "-node-name", node,
		"-pod-logs-root", logs, "-pods-root", state, "-file-check-frequency", "1s", "-v", "1",
		"-cluster-dns", "10.96.0.10", "-cluster-domain", "cluster.local"}
	cgroupRoot := "/nodekit-test-" + node
	besteffort := filepath.Join("/sys/fs/cgroup/memory", cgroupRoot, "kubepods", "besteffort")
	withCgroups := os.Geteuid() == 0 && fileExists("/sys/fs/cgroup/memory/cgroup.procs") // cgroup v1, as CI's
	if withCgroups {
		args = append(args, "-cgroups-per-qos", "-cgroup-root", cgroupRoot)
		t.Cleanup(func() { removeTree(filepath.Dir(filepath.Dir(besteffort))) })
	}
	s := start(t, args...)
	pod := func(name string) string { return name + "-" + node }
	s.waitFrame(t, "pods running", func(f string) bool {
		return matches(f, []want{{pod("web"), "init:setup", "Running", "exited 0 (Completed)"}, {pod("web"), "web", "Running", "running"}})
	})
	var webLog []byte
	// containerd copies the output on its own schedule, lagging under load.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if files, _ := filepath.Glob(filepath.Join(logs, "*_"+pod("web")+"_*", "web", "0.log")); len(files) == 1 {
			if webLog, _ = os.ReadFile(files[0]); strings.Contains(string(webLog), "nameserver") {
				break
			}
		}
	}
	if !strings.Contains(string(webLog), "nameserver 10.96.0.10") ||
		!strings.Contains(string(webLog), "search default.svc.cluster.local svc.cluster.local cluster.local") {
		t.Errorf("web's resolv.conf is not the cluster's:\n%s", webLog)
	}
	if withCgroups {
		if pods, _ := os.ReadDir(besteffort); len(pods) == 0 {
			t.Errorf("no pod cgroup under %s", besteffort)
		}
	}
	t.Logf("web running after %s", time.Since(began).Round(10*time.Millisecond))
	frame := s.waitFrame(t, "the job done and the crashing container restarted", func(f string) bool {
		_, state, restarts, ok := row(f, pod("crash"), "crash")
		n, _ := strconv.Atoi(restarts)
		return ok && n >= 1 && strings.Contains(state, "exited 3 (Error)") &&
			matches(f, []want{{pod("job"), "job", "Succeeded", "exited 0 (Completed)"}, {pod("web"), "web", "Running", "running"}})
	})
	t.Logf("after %s:\n%s", time.Since(began).Round(10*time.Millisecond), frame)
	if phase, _, _, _ := row(frame, pod("crash"), "crash"); phase != "Running" {
		t.Errorf("crashing pod under restartPolicy Always: phase %s, want Running", phase)
	}
	if got := len(ourPods(t, m, node)); got != 3 {
		t.Fatalf("the runtime holds %d pods of node %s, want 3", got, node)
	}

	if err := s.stop(t); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, s.stderr.String())
	}
	if left := ourPods(t, m, node); len(left) != 0 {
		var desc []string
		for _, p := range left {
			desc = append(desc, fmt.Sprintf("%s (%d sandboxes, %d containers)", p.Name, len(p.Sandboxes), len(p.Containers)))
		}
		t.Fatalf("left on the runtime after shutdown: %s", strings.Join(desc, ", "))
	}
	if final := lastFrame(s.stdout.String()); strings.Contains(final, "running") {
		t.Fatalf("a container still runs after shutdown:\n%s", final)
	}
	if withCgroups {
		var left []string
		entries, _ := os.ReadDir(besteffort)
		for _, e := range entries {
			if e.IsDir() {
				left = append(left, e.Name())
			}
		}
		if len(left) > 0 {
			t.Errorf("pod cgroups left after shutdown: %v", left)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// removeTree removes a test's cgroup tree bottom-up in every v1 hierarchy.
func removeTree(memoryDir string) {
	rel := strings.TrimPrefix(memoryDir, "/sys/fs/cgroup/memory")
	hierarchies, _ := os.ReadDir("/sys/fs/cgroup")
	for _, h := range hierarchies {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup", h.Name(), rel), func(p string, d os.DirEntry, err error) error {
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
