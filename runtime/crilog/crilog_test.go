package crilog_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime/crilog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func criLine(sec int, stream, tag, msg string) string {
	return fmt.Sprintf("%s %s %s %s\n", t0.Add(time.Duration(sec)*time.Second).Format(time.RFC3339Nano), stream, tag, msg)
}

func writeLog(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.log")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "")), 0o644))
	return p
}

func TestReadLogs(t *testing.T) {
	path := writeLog(t,
		criLine(0, "stdout", "F", "one"),
		criLine(1, "stderr", "F", "two"),
		"not a cri line\n",
		criLine(2, "stdout", "P", "thr"),
		criLine(2, "stdout", "F", "ee"),
		criLine(3, "stdout", "F", "four"),
	)
	clk := clocktesting.NewFakeClock(t0.Add(10 * time.Second))
	for _, tc := range []struct {
		name         string
		opts         v1.PodLogOptions
		stdout, errs string
	}{
		{"everything, each stream to its writer, partial lines joined", v1.PodLogOptions{}, "one\nthree\nfour\n", "two\n"},
		{"tailLines counts lines from the end", v1.PodLogOptions{TailLines: ptr.To[int64](2)}, "ee\nfour\n", ""},
		{"tailLines beyond the file gives all of it", v1.PodLogOptions{TailLines: ptr.To[int64](100)}, "one\nthree\nfour\n", "two\n"},
		{"tailLines 0 gives nothing", v1.PodLogOptions{TailLines: ptr.To[int64](0)}, "", ""},
		{"limitBytes cuts the output", v1.PodLogOptions{LimitBytes: ptr.To[int64](6)}, "one\n", "tw"},
		{"timestamps prefix each whole line", v1.PodLogOptions{Timestamps: true, TailLines: ptr.To[int64](1)},
			t0.Add(3*time.Second).Format(time.RFC3339Nano) + " four\n", ""},
		{"sinceTime drops older lines", v1.PodLogOptions{SinceTime: &metav1.Time{Time: t0.Add(2 * time.Second)}}, "three\nfour\n", ""},
		{"sinceSeconds counts back from now", v1.PodLogOptions{SinceSeconds: ptr.To[int64](7)}, "four\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			opts := tc.opts
			require.NoError(t, crilog.ReadLogs(context.Background(), path, &opts, crilog.Options{Clock: clk}, &out, &errs))
			assert.Equal(t, tc.stdout, out.String())
			assert.Equal(t, tc.errs, errs.String())
		})
	}
}

func TestReadLogsOfAMissingFileFails(t *testing.T) {
	err := crilog.ReadLogs(context.Background(), filepath.Join(t.TempDir(), "nope.log"), nil, crilog.Options{}, &bytes.Buffer{}, &bytes.Buffer{})
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestTailOfAFileWithoutFinalNewline(t *testing.T) {
	path := writeLog(t, criLine(0, "stdout", "F", "a"), strings.TrimSuffix(criLine(1, "stdout", "F", "b"), "\n"))
	var out bytes.Buffer
	require.NoError(t, crilog.ReadLogs(context.Background(), path, &v1.PodLogOptions{TailLines: ptr.To[int64](1)}, crilog.Options{}, &out, &out))
	assert.Equal(t, "", out.String(), "the last line is incomplete until its newline is written, so it is the one tailed and not shown")
}

func TestFollowReadsNewLinesUntilTheContainerStops(t *testing.T) {
	path := writeLog(t, criLine(0, "stdout", "F", "first"))
	running, out, done := follow(path)
	require.Eventually(t, func() bool { return out.String() == "first\n" }, 10*time.Second, time.Millisecond)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(criLine(1, "stdout", "F", "second"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return out.String() == "first\nsecond\n" }, 10*time.Second, time.Millisecond)
	// the container writes its last line and exits
	_, err = f.WriteString(criLine(2, "stdout", "F", "last"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	running.Store(false)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end after the container stopped")
	}
	assert.Equal(t, "first\nsecond\nlast\n", out.String())
}

func TestFollowGoesOnInTheNewFileAfterARotation(t *testing.T) {
	path := writeLog(t, criLine(0, "stdout", "F", "first"))
	running, out, done := follow(path)
	require.Eventually(t, func() bool { return out.String() == "first\n" }, 10*time.Second, time.Millisecond)
	// The runtime's file, as it holds it open.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	want := "first\n"
	for i, ts := range []string{"20260102-030405", "20260102-030415"} {
		// rotation: the file is renamed, the runtime writes on to it
		// until it reopens the log, then to the new file
		require.NoError(t, os.Rename(path, path+"."+ts))
		_, err = f.WriteString(criLine(10*i+1, "stdout", "F", "before reopen "+ts))
		require.NoError(t, err)
		time.Sleep(20 * time.Millisecond) // the reader polls meanwhile and sees no file
		require.NoError(t, f.Close())
		f, err = os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, err = f.WriteString(criLine(10*i+2, "stdout", "F", "after reopen "+ts))
		require.NoError(t, err)
		want += "before reopen " + ts + "\nafter reopen " + ts + "\n"
		require.Eventually(t, func() bool { return out.String() == want }, 10*time.Second, time.Millisecond, "got %q", out.String())
	}
	_, err = f.WriteString(criLine(30, "stdout", "F", "last"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	running.Store(false)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end after the container stopped")
	}
	assert.Equal(t, want+"last\n", out.String())
}

func TestTailAfterARotationReadsTheLiveFileAsTheKubelets(t *testing.T) {
	path := writeLog(t, criLine(0, "stdout", "F", "old one"), criLine(1, "stdout", "F", "old two"))
	require.NoError(t, os.Rename(path, path+".20260102-030405"))
	require.NoError(t, os.WriteFile(path, []byte(criLine(2, "stdout", "F", "new")), 0o644))
	var out bytes.Buffer
	require.NoError(t, crilog.ReadLogs(context.Background(), path, &v1.PodLogOptions{TailLines: ptr.To[int64](3)}, crilog.Options{}, &out, &out))
	assert.Equal(t, "new\n", out.String())
}

func TestFollowEndsWithItsContext(t *testing.T) {
	path := writeLog(t, criLine(0, "stdout", "F", "x"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- crilog.ReadLogs(ctx, path, &v1.PodLogOptions{Follow: true}, crilog.Options{PollInterval: time.Millisecond}, &bytes.Buffer{}, &bytes.Buffer{})
	}()
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled follow kept running")
	}
}

// Running answers false when its own CRI call fails with the cancelled
// context: the follow still ends with the context's error, not as if the
// container had exited (runtime/cri's log-rotation test on containerd 2.x
// got nil).
func TestCancelledFollowIsNoExitWhenRunningFailsWithIt(t *testing.T) {
	path := writeLog(t, criLine(0, "stdout", "F", "x"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	running := func(context.Context) bool {
		// The second question is cancelled while it is asked.
		if calls++; calls == 2 {
			cancel()
			return false
		}
		return true
	}
	err := crilog.ReadLogs(ctx, path, &v1.PodLogOptions{Follow: true},
		crilog.Options{Running: running, PollInterval: time.Millisecond, Clock: clock.RealClock{}}, &bytes.Buffer{}, &bytes.Buffer{})
	assert.ErrorIs(t, err, context.Canceled)
}

// A huge file read with limitBytes or tailLines costs memory in proportion
// to the output, not to the file.
func TestHugeFileWithLimitsReadsInBoundedMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	f, err := os.Create(path)
	require.NoError(t, err)
	line := criLine(0, "stdout", "F", strings.Repeat("x", 1000))
	for range 64 << 10 { // ~64 MiB
		_, err := f.WriteString(line)
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
	for _, opts := range []*v1.PodLogOptions{{LimitBytes: ptr.To[int64](4096)}, {TailLines: ptr.To[int64](3)}} {
		var out bytes.Buffer
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		require.NoError(t, crilog.ReadLogs(context.Background(), path, opts, crilog.Options{}, &out, &out))
		goruntime.ReadMemStats(&after)
		assert.LessOrEqual(t, out.Len(), 3*1001+4096)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "a 64 MiB file read with a limit allocates under 1 MiB")
	}
}

// follow starts following path's log while running stays true, both
// streams into out; done gets ReadLogs' error once it returns.
func follow(path string) (running *atomic.Bool, out *testenv.Buffer, done chan error) {
	running, out, done = new(atomic.Bool), new(testenv.Buffer), make(chan error, 1)
	running.Store(true)
	go func() {
		done <- crilog.ReadLogs(context.Background(), path, &v1.PodLogOptions{Follow: true},
			crilog.Options{Running: func(context.Context) bool { return running.Load() }, PollInterval: time.Millisecond, Clock: clock.RealClock{}}, out, out)
	}()
	return running, out, done
}
