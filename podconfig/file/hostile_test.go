package file

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodekit/nodekit/internal/reltable"
	"github.com/nodekit/nodekit/podconfig"
)

// A directory of 1,000 manifests is read into one SET of 1,000 pods.
func TestDirectoryOfAThousandManifests(t *testing.T) {
	dir := t.TempDir()
	for i := range 1000 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("pod-%04d.yaml", i)), []byte(manifest(fmt.Sprintf("p%04d", i), "i:1")), 0o644))
	}
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	start := time.Now()
	h := newHarness(t, dir, nil)
	h.start()
	pods := h.next()
	took := time.Since(start)
	goruntime.ReadMemStats(&after)
	require.Len(t, pods, 1000)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("1,000 manifests read in %v, %d bytes allocated", took, alloc)
	reltable.Print(t, reltable.Row{
		Test: "podconfig/file: TestDirectoryOfAThousandManifests",
		Done: "a manifest directory of 1,000 files",
		Held: fmt.Sprintf("one SET of 1,000 pods; first read %v, %.1f MiB allocated", took.Round(time.Millisecond), float64(alloc)/(1<<20)),
		Run:  "go test -run Thousand -v ./podconfig/file",
	})
}

// A ConfigMap-style volume: manifests are symlinks into ..data, itself a
// symlink to a timestamped directory, and an update swaps ..data
// atomically. The source sees the new manifest on its re-read, never the
// hidden directories' copies as pods of their own.
func TestConfigMapStyleDataSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	write := func(stamp, image string) {
		ts := filepath.Join(dir, "..2026_11_23_"+stamp)
		require.NoError(t, os.Mkdir(ts, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(ts, "pod.yaml"), []byte(manifest("cm", image)), 0o644))
		tmp := filepath.Join(dir, "..data_tmp")
		require.NoError(t, os.Symlink(filepath.Base(ts), tmp))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, "..data")))
	}
	write("1", "i:1")
	require.NoError(t, os.Symlink("..data/pod.yaml", filepath.Join(dir, "pod.yaml")))
	h := newHarness(t, dir, nil)
	h.start()
	pods := h.next()
	require.Len(t, pods, 1)
	require.Equal(t, "i:1", pods["cm-random-test-hostname"].Spec.Containers[0].Image)

	write("2", "i:2")
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "..2026_11_23_1")))
	h.resync()
	pods = h.next()
	require.Len(t, pods, 1)
	assert.Equal(t, "i:2", pods["cm-random-test-hostname"].Spec.Containers[0].Image)
	reltable.Print(t, reltable.Row{
		Test: "podconfig/file: TestConfigMapStyleDataSymlinkSwap",
		Done: "ConfigMap-style `..data` symlink swapped to a new timestamped directory, the old one removed",
		Held: "the new manifest is read on the next re-read; one pod, never the hidden copies",
		Run:  "go test -run DataSymlinkSwap -v ./podconfig/file",
	})
}

// Files that cannot be used — unreadable, a dangling symlink, a FIFO (a read
// would block forever), half-written YAML, an empty file, editor swap and
// backup files — are each skipped or reported with the reason, and the
// good manifest beside them goes through.
func TestHostileFilesLeaveGoodManifestsAlone(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "good.yaml"), []byte(manifest("good", "i:1")), 0o644))
	unreadable := filepath.Join(dir, "unreadable.yaml")
	require.NoError(t, os.WriteFile(unreadable, []byte(manifest("secret", "i:1")), 0o000))
	require.NoError(t, os.Symlink(filepath.Join(dir, "missing.yaml"), filepath.Join(dir, "dangling.yaml")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644))
	full := manifest("half", "i:1")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "half.yaml"), []byte(full[:len(full)/2]), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty.yaml"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".good.yaml.swp"), []byte("b0VIM 8.2\x00\x00garbage"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "4913"), nil, 0o644)) // vim's write test

	h := newHarness(t, dir, nil)
	h.start()
	pods := h.next()
	want := []string{"good-random-test-hostname"}
	if os.Geteuid() == 0 { // root reads a mode-000 file
		want = append(want, "secret-random-test-hostname")
	}
	got := make([]string, 0, len(pods))
	for name := range pods {
		got = append(got, name)
	}
	assert.ElementsMatch(t, want, got)
	events := h.rec.Events()
	reported := map[string]bool{}
	for _, e := range events {
		t.Log(e)
		assert.Equal(t, podconfig.ReasonFailedValidation, e.Reason, e.Message)
		for _, f := range []string{"half.yaml", "empty.yaml", "good.yaml", ".good.yaml.swp", "fifo.yaml"} {
			reported[f] = reported[f] || strings.Contains(e.Message, "/"+f+":")
		}
	}
	assert.True(t, reported["half.yaml"], "half-written YAML is reported")
	assert.True(t, reported["empty.yaml"], "an empty file is reported")
	for _, f := range []string{"good.yaml", ".good.yaml.swp", "fifo.yaml"} {
		assert.False(t, reported[f], "%s is not reported", f)
	}
	reltable.Print(t, reltable.Row{
		Test: "podconfig/file: TestHostileFilesLeaveGoodManifestsAlone",
		Done: "beside a good manifest: a mode-000 file, a dangling symlink, a FIFO, half-written YAML, an empty file, a vim swap file and vim's 4913 probe",
		Held: fmt.Sprintf("the good pod is read; the rest skipped or reported (%d FailedValidation events), no read blocks on the FIFO", len(events)),
		Run:  "go test -run HostileFiles -v ./podconfig/file",
	})
}
