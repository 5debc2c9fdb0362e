package cri_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime/cri"
)

// lineNumbers parses "line <n>" output into its numbers.
func lineNumbers(t *testing.T, out string) []int {
	t.Helper()
	var ns []int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		n, err := strconv.Atoi(strings.TrimPrefix(l, "line "))
		require.NoError(t, err, "line %q", l)
		ns = append(ns, n)
	}
	return ns
}

func TestContainerLogRotationOnContainerd(t *testing.T) {
	endpoint := testenv.CRIEndpoint(t)
	image := testenv.TestImage(t)
	logs := t.TempDir()
	const maxFiles = 3
	m, err := cri.New(context.Background(), cri.Config{Endpoint: endpoint, PodLogsRoot: logs, PodsRoot: t.TempDir(),
		ContainerLogMaxSize: 4 << 10, ContainerLogMaxFiles: maxFiles, ContainerLogMonitorInterval: 1100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	pod := realPod("logrotate", image, func(p *v1.Pod) {
		p.Spec.Containers[0].Command = []string{"sh", "-c", "i=0; while true; do i=$((i+1)); echo line $i; sleep 0.002; done"}
	})
	cleanup(t, m, pod)
	st := syncUntil(t, ctx, m, pod, nil, 50, 100*time.Millisecond, running("main"))
	id := st.FindContainerStatusByName("main").ID

	rctx, stopRotation := context.WithCancel(ctx)
	rotationDone := make(chan error)
	go func() { rotationDone <- m.LogManager().Run(rctx) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rotation pass: %v; files %v", m.LogManager().RotateLogs(ctx), lsDir(filepath.Join(logDir(logs, pod), "main")))
		}
	})
	defer func() {
		stopRotation()
		require.NoError(t, <-rotationDone)
	}()

	// Follow from before the rotations: the lines go on, none lost.
	fctx, stopFollow := context.WithCancel(ctx)
	var followed testenv.Buffer
	followDone := make(chan error)
	go func() {
		followDone <- m.GetContainerLogs(fctx, nil, id, &v1.PodLogOptions{Follow: true}, &followed, &followed)
	}()

	dir := filepath.Join(logDir(logs, pod), "main")
	// Two compressed files seen: at least three rotations, the last of
	// which removed the oldest file.
	seen := map[string]bool{}
	require.Eventually(t, func() bool {
		gz, _ := filepath.Glob(filepath.Join(dir, "0.log.*.gz"))
		for _, f := range gz {
			seen[f] = true
		}
		return len(seen) >= 2
	}, 2*time.Minute, 50*time.Millisecond, "files: %v", lsDir(dir))
	// The follow reaches the live file, three rotations after its start.
	live := liveFirstLine(t, filepath.Join(dir, "0.log"))
	require.Eventually(t, func() bool {
		out := strings.TrimSpace(followed.String())
		last := out[strings.LastIndexByte(out, '\n')+1:]
		n, err := strconv.Atoi(strings.TrimPrefix(last, "line "))
		return err == nil && n >= live
	}, logWait, 50*time.Millisecond, "follow stuck at %d", len(followed.String()))
	stopFollow()
	require.ErrorIs(t, <-followDone, context.Canceled)
	ns := lineNumbers(t, followed.String())
	assert.Equal(t, 1, ns[0], "follow starts at the first line")
	for i := 1; i < len(ns); i++ {
		require.Equal(t, ns[i-1]+1, ns[i], "follow lost or repeated lines across a rotation")
	}
	whole := ns[len(ns)-1]

	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var kept []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".tmp") {
			kept = append(kept, e.Name())
		}
	}
	assert.LessOrEqual(t, len(kept), maxFiles, "at most MaxFiles files: %v", kept)
	assert.Contains(t, kept, "0.log")

	// kubectl logs --tail: the newest lines, from the live file.
	// Right after a rotation the live file may hold fewer lines.
	var tail bytes.Buffer
	require.Eventually(t, func() bool {
		tail.Reset()
		err := m.GetContainerLogs(ctx, nil, id, &v1.PodLogOptions{TailLines: ptr.To[int64](5)}, &tail, &tail)
		return err == nil && strings.Count(tail.String(), "\n") == 5
	}, logWait, 50*time.Millisecond, "tail: %q", tail.String())
	tn := lineNumbers(t, tail.String())
	assert.GreaterOrEqual(t, tn[4], whole, "the tail is the newest lines")
	for i := 1; i < len(tn); i++ {
		assert.Equal(t, tn[i-1]+1, tn[i])
	}
}

func lsDir(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		fi, _ := e.Info()
		out = append(out, e.Name()+" "+strconv.FormatInt(fi.Size(), 10))
	}
	return out
}

// liveFirstLine is the number of the first line of the live log file, once
// it has one.
func liveFirstLine(t *testing.T, path string) int {
	t.Helper()
	var n int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		first, _, ok := strings.Cut(string(b), "\n")
		if err != nil || !ok {
			return false
		}
		_, msg, _ := strings.Cut(first, " stdout F line ")
		n, err = strconv.Atoi(msg)
		return err == nil
	}, logWait, 50*time.Millisecond)
	return n
}
