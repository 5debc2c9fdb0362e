package cri_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

// rotEnv is a fake env with one running container "main" of pod "rot".
type rotEnv struct {
	*fakeEnv
	id, log string
}

func newRotEnv(t *testing.T, tweak ...func(*cri.Config)) *rotEnv {
	t.Helper()
	e := newFakeEnv(t, tweak...)
	e.srv.SetBehavior("main", fakecri.Behavior{Log: "started"})
	require.NoError(t, e.sync(t, newPod("rot", "busybox:1"), nil).Error())
	ids := e.srv.ContainerIDs("main")
	require.Len(t, ids, 1)
	e.srv.Runtime.Lock()
	log := e.srv.Runtime.Containers[ids[0]].LogPath
	e.srv.Runtime.Unlock()
	require.FileExists(t, log)
	return &rotEnv{fakeEnv: e, id: ids[0], log: log}
}

// files lists the container's log directory, names relative to it.
func (e *rotEnv) files(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Dir(e.log))
	require.NoError(t, err)
	var out []string
	for _, d := range ents {
		out = append(out, d.Name())
	}
	sort.Strings(out)
	return out
}

func write(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o640))
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	r, err := gzip.NewReader(f)
	require.NoError(t, err)
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(b)
}

func TestContainerLogRotation(t *testing.T) {
	big := strings.Repeat("x", 100)
	ts := t0.Format("20060102-150405") // the kubelet's suffix
	tests := []struct {
		name     string
		maxSize  int64
		maxFiles int
		setup    func(t *testing.T, e *rotEnv)
		wantErr  bool
		want     []string // files in the log directory after one pass
		check    func(t *testing.T, e *rotEnv)
	}{
		{
			name: "a log under the limit is left alone", maxSize: 1000,
			want: []string{"0.log"},
		},
		{
			name: "a log at the limit is renamed with a timestamp and reopened", maxSize: 100,
			setup: func(t *testing.T, e *rotEnv) { write(t, e.log, big) },
			want:  []string{"0.log", "0.log." + ts},
			check: func(t *testing.T, e *rotEnv) {
				b, err := os.ReadFile(e.log + "." + ts)
				require.NoError(t, err)
				assert.Equal(t, big, string(b), "the rotated file holds the old content")
				b, err = os.ReadFile(e.log)
				require.NoError(t, err)
				assert.Empty(t, b, "the runtime reopened a new file")
				assert.Equal(t, 1, e.srv.Calls("ReopenContainerLog"))
			},
		},
		{
			name: "older rotated files are compressed", maxSize: 100,
			setup: func(t *testing.T, e *rotEnv) {
				write(t, e.log, big)
				write(t, e.log+".20260101-000000", "older")
			},
			want: []string{"0.log", "0.log.20260101-000000.gz", "0.log." + ts},
			check: func(t *testing.T, e *rotEnv) {
				assert.Equal(t, "older", gunzip(t, e.log+".20260101-000000.gz"))
			},
		},
		{
			name: "the oldest are removed so that MaxFiles remain", maxSize: 100, maxFiles: 3,
			setup: func(t *testing.T, e *rotEnv) {
				write(t, e.log, big)
				write(t, e.log+".20260101-000000.gz", "oldest")
				write(t, e.log+".20260102-000000.gz", "older")
				write(t, e.log+".20260103-000000", "newer")
			},
			want: []string{"0.log", "0.log.20260103-000000.gz", "0.log." + ts},
		},
		{
			name: "a failed reopen puts the log back", maxSize: 100,
			setup: func(t *testing.T, e *rotEnv) {
				write(t, e.log, big)
				e.srv.FailNext("ReopenContainerLog", status.Error(codes.Internal, "shim gone"))
			},
			wantErr: true,
			want:    []string{"0.log"},
			check: func(t *testing.T, e *rotEnv) {
				b, err := os.ReadFile(e.log)
				require.NoError(t, err)
				assert.Equal(t, big, string(b))
			},
		},
		{
			name: "leftovers of a failed rotation are removed", maxSize: 100,
			setup: func(t *testing.T, e *rotEnv) {
				write(t, e.log, big)
				write(t, e.log+".20260101-000000", "compressed already")
				write(t, e.log+".20260101-000000.gz", "")
				write(t, e.log+".20260102-000000.gz.tmp", "half")
			},
			want: []string{"0.log", "0.log.20260101-000000.gz", "0.log." + ts},
		},
		{
			name: "a second rotation within a second waits rather than overwrite", maxSize: 100,
			setup: func(t *testing.T, e *rotEnv) {
				write(t, e.log, big)
				write(t, e.log+"."+ts+".gz", "rotated this second")
			},
			want: []string{"0.log", "0.log." + ts + ".gz"},
			check: func(t *testing.T, e *rotEnv) {
				b, err := os.ReadFile(e.log + "." + ts + ".gz")
				require.NoError(t, err)
				assert.Equal(t, "rotated this second", string(b))
				assert.Zero(t, e.srv.Calls("ReopenContainerLog"))
			},
		},
		{
			name: "a missing log is reopened", maxSize: 100,
			setup: func(t *testing.T, e *rotEnv) { require.NoError(t, os.Remove(e.log)) },
			want:  []string{"0.log"},
			check: func(t *testing.T, e *rotEnv) { assert.Equal(t, 1, e.srv.Calls("ReopenContainerLog")) },
		},
		{
			name: "a negative max size disables rotation", maxSize: -1,
			setup: func(t *testing.T, e *rotEnv) { write(t, e.log, big) },
			want:  []string{"0.log"},
		},
		{
			name: "a container that is not running is left alone", maxSize: 100,
			setup: func(t *testing.T, e *rotEnv) {
				write(t, e.log, big)
				require.NoError(t, e.srv.Exit(e.id, 0))
			},
			want: []string{"0.log"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newRotEnv(t, func(c *cri.Config) {
				c.ContainerLogMaxSize, c.ContainerLogMaxFiles = tt.maxSize, tt.maxFiles
			})
			if tt.setup != nil {
				tt.setup(t, e)
			}
			e.srv.ResetCalls()
			err := e.m.LogManager().RotateLogs(e.ctx)
			if tt.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, e.files(t))
			if tt.check != nil {
				tt.check(t, e)
			}
		})
	}
}

func TestContainerLogManagerRunRotatesEveryInterval(t *testing.T) {
	e := newRotEnv(t, func(c *cri.Config) {
		c.ContainerLogMaxSize, c.ContainerLogMonitorInterval = 10, 30*time.Second
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.m.LogManager().Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	write(t, e.log, strings.Repeat("x", 10))
	require.Eventually(t, e.clock.HasWaiters, 5*time.Second, time.Millisecond)
	e.clock.Step(29 * time.Second)
	assert.Equal(t, []string{"0.log"}, e.files(t), "not before the interval")
	e.clock.Step(time.Second)
	rotated := "0.log." + e.clock.Now().Format("20060102-150405")
	require.Eventually(t, func() bool { return len(e.files(t)) == 2 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"0.log", rotated}, e.files(t))
}

func TestGarbageCollectRemovesDeadContainersLogFiles(t *testing.T) {
	e := newFakeEnv(t)
	e.srv.SetBehavior("main", fakecri.Behavior{ExitOnStart: true, ExitCode: 1, Log: "crashed"})
	pod := newPod("gc", "busybox:1")
	for range 2 {
		require.NoError(t, e.sync(t, pod, runtime.NewBackoff(time.Second, time.Second, 0, e.clock)).Error())
		e.clock.Step(time.Minute)
	}
	dir := filepath.Join(logDir(e.logs, pod), "main")
	write(t, filepath.Join(dir, "0.log.20260101-000000.gz"), "rotated")
	write(t, filepath.Join(dir, "0.log.20260102-000000"), "rotated")
	require.FileExists(t, filepath.Join(dir, "1.log"))

	require.NoError(t, e.m.GarbageCollect(e.ctx, runtime.GCPolicy{MaxPerPodContainer: 1, MaxContainers: -1}, false))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, d := range ents {
		names = append(names, d.Name())
	}
	assert.Equal(t, []string{"1.log"}, names, "the collected instance's log and rotated logs are gone, the kept one's stays")
}

func TestLogRotationConfigIsChecked(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*cri.Config)
	}{
		{"one file cannot rotate", func(c *cri.Config) { c.ContainerLogMaxFiles = 1 }},
		{"negative files", func(c *cri.Config) { c.ContainerLogMaxFiles = -1 }},
		{"negative workers", func(c *cri.Config) { c.ContainerLogMaxWorkers = -1 }},
		{"negative interval", func(c *cri.Config) { c.ContainerLogMonitorInterval = -time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cri.Config{Endpoint: "unix:///nonexistent.sock", CallTimeout: time.Second}
			tt.cfg(&c)
			_, err := cri.New(context.Background(), c)
			require.ErrorIs(t, err, runtime.ErrInvalidConfig)
		})
	}
}

func TestRotateLogsRotatesEveryRunningContainerWithItsWorkers(t *testing.T) {
	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d workers", workers), func(t *testing.T) {
			e := newFakeEnv(t, func(c *cri.Config) { c.ContainerLogMaxSize, c.ContainerLogMaxWorkers = 10, workers })
			e.srv.SetBehavior("main", fakecri.Behavior{Log: "more than ten bytes"})
			var logs []string
			for _, name := range []string{"a", "b", "c", "d"} {
				pod := newPod(name, "busybox:1")
				require.NoError(t, e.sync(t, pod, nil).Error())
				logs = append(logs, filepath.Join(logDir(e.logs, pod), "main", "0.log"))
			}
			require.NoError(t, e.m.LogManager().RotateLogs(e.ctx))
			for _, l := range logs {
				assert.FileExists(t, l+"."+t0.Format("20060102-150405"))
			}
			assert.Equal(t, len(logs), e.srv.Calls("ReopenContainerLog"))
		})
	}
}
