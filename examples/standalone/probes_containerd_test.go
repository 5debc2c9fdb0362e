package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nodekit/nodekit/internal/testenv"
)

// TestProbesManifestOnContainerd runs the shipped probes.yaml on the
// containerd of hack/containerd.sh: the probe commands run in the
// container, which turns ready, then unready and is restarted when its
// health file goes.
func TestProbesManifestOnContainerd(t *testing.T) {
	endpoint := testenv.ExclusiveCRIEndpoint(t)
	image, pause := testenv.TestImage(t), testenv.PauseImage(t)
	node := uniqueNode("probes-e2e-")
	b, err := os.ReadFile("manifests/probes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "probes.yaml"), []byte(strings.ReplaceAll(string(b), "busybox:1.36", image)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, "-cri", endpoint, "-pause-image", pause, "-pod-manifest-path", dir, "-node-name", node,
		"-pod-logs-root", t.TempDir(), "-pods-root", t.TempDir())
	pod := "probed-" + node
	s.waitFrame(t, "the container ready", func(f string) bool {
		return matches(f, []want{{pod, "app", "Running", "running; ready"}})
	})
	s.waitFrame(t, "the container restarted after failing its liveness probe", func(f string) bool {
		_, _, restarts, ok := row(f, pod, "app")
		n, _ := strconv.Atoi(restarts)
		return ok && n >= 1
	})
	if err := s.stop(t); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, s.stderr.String())
	}
}
