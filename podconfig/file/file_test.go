package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/podconfig/staticpod"
	"github.com/nodekit/nodekit/podutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const hostname = "Random-Test-Hostname"

// waitTimeout only guards against a hung test; fsnotify delivers events
// asynchronously, so tests wait for the update rather than sleep.
const waitTimeout = 10 * time.Second

func manifest(name, image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: mynamespace
spec:
  containers:
  - name: image
    image: %s
`, name, image)
}

// writeAtomic writes through a dotfile and a rename, as careful tools do.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

type harness struct {
	t       *testing.T
	src     *Source
	clock   *clocktesting.FakeClock
	rec     *podconfigtest.Recorder
	updates chan podconfig.PodUpdate
	cancel  context.CancelFunc
	done    chan error
}

func newHarness(t *testing.T, path string, mutate func(*Source)) *harness {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	rec := podconfigtest.NewRecorder(0)
	src, err := New(Config{Path: path, NodeName: hostname, Clock: clk, Recorder: rec})
	require.NoError(t, err)
	if mutate != nil {
		mutate(src)
	}
	return &harness{t: t, src: src, clock: clk, rec: rec, updates: make(chan podconfig.PodUpdate)}
}

func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.src.Run(ctx, h.updates) }()
	h.t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			assert.NoError(h.t, err)
		case <-time.After(waitTimeout):
			h.t.Error("Run did not return")
		}
	})
}

// next returns the next SET, by pod name.
func (h *harness) next() map[string]*v1.Pod {
	h.t.Helper()
	select {
	case u := <-h.updates:
		require.Equal(h.t, podconfig.SET, u.Op)
		require.Equal(h.t, podutil.FileSource, u.Source)
		m := map[string]*v1.Pod{}
		for _, p := range u.Pods {
			m[p.Name] = p
		}
		return m
	case <-time.After(waitTimeout):
		h.t.Fatal("no update")
	}
	return nil
}

func (h *harness) nothingPending() {
	h.t.Helper()
	select {
	case u := <-h.updates:
		h.t.Fatalf("unexpected update with %d pods", len(u.Pods))
	default:
	}
}

// resync steps the clock by the check frequency once the ticker exists.
func (h *harness) resync() {
	h.t.Helper()
	require.Eventually(h.t, h.clock.HasWaiters, waitTimeout, time.Millisecond)
	h.clock.Step(20 * time.Second)
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, c := range map[string]Config{
		"no path":  {NodeName: "n"},
		"no node":  {Path: "/x"},
		"negative": {Path: "/x", NodeName: "n", CheckFrequency: -1},
	} {
		_, err := New(c)
		assert.ErrorIs(t, err, podconfig.ErrInvalidConfig, name)
	}
}

func TestUpdateOnNonExistentPath(t *testing.T) {
	h := newHarness(t, filepath.Join(t.TempDir(), "random_non_existent_path"), nil)
	h.start()
	assert.Empty(t, h.next(), "a missing path still reports in with an empty SET")
}

func TestReadPodsFromDirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(manifest("test", "test/image")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.json"), []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"json"},"spec":{"containers":[{"name":"c","image":"i:1"}]}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".hidden.yaml"), []byte(manifest("hidden", "i")), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "c.yaml"), []byte(manifest("nested", "i")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte{1, 2, 3}, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "secret.yaml"), []byte(manifest("sec", "i")+"  serviceAccountName: sa\n"), 0o644))

	h := newHarness(t, dir, nil)
	h.start()
	pods := h.next()
	require.Len(t, pods, 2, "dotfile, subdirectory and invalid manifests are skipped")
	p := pods["test-random-test-hostname"]
	require.NotNil(t, p)
	assert.Equal(t, "mynamespace", p.Namespace)
	assert.Equal(t, hostname, p.Spec.NodeName)
	assert.Equal(t, []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}, p.Spec.Tolerations)
	assert.Equal(t, string(p.UID), p.Annotations[podutil.ConfigHashAnnotationKey])
	assert.Equal(t, v1.PullAlways, p.Spec.Containers[0].ImagePullPolicy)
	assert.NoError(t, staticpod.Validate(p))
	assert.NotNil(t, pods["json-random-test-hostname"])

	events := h.rec.Events()
	require.Len(t, events, 2)
	var msgs []string
	for _, e := range events {
		assert.Equal(t, podconfig.ReasonFailedValidation, e.Reason)
		msgs = append(msgs, e.Message)
	}
	assert.Contains(t, msgs[0]+msgs[1], filepath.Join(dir, "bad.yaml"))
	assert.Contains(t, msgs[0]+msgs[1], "may not reference serviceaccounts")

	// A re-read with nothing changed sends nothing and reports nothing new.
	h.resync()
	h.resync()
	h.nothingPending()
	assert.Len(t, h.rec.Events(), 2)
}

func TestReadSingleFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pod.yaml")
	require.NoError(t, os.WriteFile(path, []byte(manifest("test", "i:1")), 0o644))
	h := newHarness(t, path, nil)
	h.start()
	assert.Contains(t, h.next(), "test-random-test-hostname")

	// Replacing the file by rename is followed.
	writeAtomic(t, path, manifest("test", "i:2"))
	pods := h.next()
	assert.Equal(t, "i:2", pods["test-random-test-hostname"].Spec.Containers[0].Image)

	// Another file next to it is not ours.
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(path), "other.yaml"), []byte(manifest("other", "i")), 0o644))
	h.resync()
	h.nothingPending()
}

func TestWatchFileAddedChangedRenamedRemoved(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir, nil)
	h.start()
	assert.Empty(t, h.next())

	path := filepath.Join(dir, "test_pod_manifest")
	writeAtomic(t, path, manifest("test", "image:1"))
	pods := h.next()
	require.Contains(t, pods, "test-random-test-hostname")
	uid := pods["test-random-test-hostname"].UID

	// An in-place edit.
	require.NoError(t, os.WriteFile(path, []byte(manifest("test", "image:2")), 0o644))
	pods = h.next()
	assert.Equal(t, "image:2", pods["test-random-test-hostname"].Spec.Containers[0].Image)

	// A rename: the pod's UID depends on the path.
	require.NoError(t, os.Rename(path, path+"_ch"))
	for {
		pods = h.next()
		if p := pods["test-random-test-hostname"]; p != nil {
			assert.NotEqual(t, uid, p.UID)
			break
		}
	}

	require.NoError(t, os.Remove(path+"_ch"))
	for len(pods) != 0 {
		pods = h.next()
	}
}

func TestInvalidEditKeepsLastGoodPodUntilResync(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pod.yaml")
	require.NoError(t, os.WriteFile(path, []byte(manifest("test", "i:1")), 0o644))
	h := newHarness(t, dir, nil)
	h.start()
	require.Len(t, h.next(), 1)

	writeAtomic(t, path, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: test\nspec:\n  containers: []\n")
	require.Eventually(t, func() bool { return len(h.rec.Events()) == 1 }, waitTimeout, time.Millisecond)
	h.nothingPending()
	assert.Contains(t, h.rec.Events()[0].Message, path)

	h.resync()
	assert.Empty(t, h.next(), "the periodic re-read drops the invalid manifest")
	assert.Len(t, h.rec.Events(), 1, "the same bad content is reported once")
}

func TestResyncSeesChangesBehindSymlinks(t *testing.T) {
	dir, target := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(target, "pod.yaml"), []byte(manifest("linked", "i:1")), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(target, "pod.yaml"), filepath.Join(dir, "pod.yaml")))
	h := newHarness(t, dir, nil)
	h.start()
	require.Contains(t, h.next(), "linked-random-test-hostname")

	// inotify on dir does not see writes in target; the re-read does.
	require.NoError(t, os.WriteFile(filepath.Join(target, "pod.yaml"), []byte(manifest("linked", "i:2")), 0o644))
	h.resync()
	assert.Equal(t, "i:2", h.next()["linked-random-test-hostname"].Spec.Containers[0].Image)
}

func TestPathAppearingLaterIsPickedUp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	h := newHarness(t, dir, nil)
	h.start()
	assert.Empty(t, h.next())
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(manifest("late", "i")), 0o644))
	h.resync()
	assert.Contains(t, h.next(), "late-random-test-hostname")
}

// flakyWatcher fails to start a given number of times, then delegates; it
// records the fake time of each attempt.
type flakyWatcher struct {
	clock    *clocktesting.FakeClock
	mu       sync.Mutex
	failures int
	at       []time.Time
}

func (f *flakyWatcher) new() (watcher, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = append(f.at, f.clock.Now())
	if len(f.at) <= f.failures {
		return nil, errors.New("too many open files")
	}
	return newFSWatcher()
}

func (f *flakyWatcher) attempts() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.at...)
}

func TestWatcherErrorsRetryWithBackoff(t *testing.T) {
	dir := t.TempDir()
	fw := &flakyWatcher{failures: 2}
	h := newHarness(t, dir, func(s *Source) { fw.clock = h0clock(s); s.newWatcher = fw.new })
	h.start()
	assert.Empty(t, h.next())

	// Step the clock a second at a time until the third attempt succeeds.
	require.Eventually(t, func() bool {
		h.clock.Step(time.Second)
		return len(fw.attempts()) >= 3
	}, waitTimeout, time.Millisecond)
	at := fw.attempts()
	assert.GreaterOrEqual(t, at[1].Sub(at[0]), time.Second, "first retry after 1s")
	assert.GreaterOrEqual(t, at[2].Sub(at[1]), 2*time.Second, "back-off doubled")

	// The watch now works: a new file is seen. Drain re-reads triggered by
	// the stepping until the pod shows up.
	writeAtomic(t, filepath.Join(dir, "p.yaml"), manifest("watched", "i"))
	for {
		if _, ok := h.next()["watched-random-test-hostname"]; ok {
			break
		}
	}
}

// h0clock returns the fake clock a harness gave the source.
func h0clock(s *Source) *clocktesting.FakeClock { return s.c.Clock.(*clocktesting.FakeClock) }

func TestWatchErrorRestartsWatch(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var fakes []*fakeWatcher
	h := newHarness(t, dir, func(s *Source) {
		s.newWatcher = func() (watcher, error) {
			mu.Lock()
			defer mu.Unlock()
			f := &fakeWatcher{events: make(chan fsnotify.Event), errs: make(chan error)}
			fakes = append(fakes, f)
			return f, nil
		}
	})
	h.start()
	assert.Empty(t, h.next())
	mu.Lock()
	first := fakes[0]
	mu.Unlock()
	first.errs <- errors.New("queue overflow")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(fakes) == 2 }, waitTimeout, time.Millisecond)
	assert.True(t, first.isClosed())
}

type fakeWatcher struct {
	events chan fsnotify.Event
	errs   chan error
	mu     sync.Mutex
	closed bool
}

func (f *fakeWatcher) Add(string) error              { return nil }
func (f *fakeWatcher) Events() <-chan fsnotify.Event { return f.events }
func (f *fakeWatcher) Errors() <-chan error          { return f.errs }
func (f *fakeWatcher) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}
func (f *fakeWatcher) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

func TestTooLargeManifestIsRefused(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(manifest("big", "i")), 0o644))
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	rec := podconfigtest.NewRecorder(0)
	src, err := New(Config{Path: dir, NodeName: "n", Clock: clk, Recorder: rec, MaxFileBytes: 20})
	require.NoError(t, err)
	next, err := src.readAll()
	require.NoError(t, err)
	assert.Nil(t, next[filepath.Join(dir, "p.yaml")])
	require.Len(t, rec.Events(), 1)
	assert.Contains(t, rec.Events()[0].Message, "more than 20 bytes")
}

func TestUnknownFieldsGiveAWarningEventOnThePodThatStillRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pod.yaml")
	require.NoError(t, os.WriteFile(path, []byte(manifest("typo", "i:1")+"    comand: [sleep]\n    imagePullPolcy: Always\n"), 0o644))
	h := newHarness(t, dir, nil)
	h.start()
	pods := h.next()
	require.Len(t, pods, 1, "the pod runs without the unknown fields")
	pod := pods["typo-"+strings.ToLower(hostname)]
	require.NotNil(t, pod)

	require.Eventually(t, func() bool { return len(h.rec.Events()) == 1 }, waitTimeout, time.Millisecond)
	e := h.rec.Events()[0]
	assert.Equal(t, v1.EventTypeWarning, e.Type)
	assert.Equal(t, podconfig.ReasonFieldValidationWarning, e.Reason)
	assert.Contains(t, e.Message, `unknown field "spec.containers[0].comand"`)
	assert.Contains(t, e.Message, `unknown field "spec.containers[0].imagePullPolcy"`)
	got, ok := e.Object.(*v1.Pod)
	require.True(t, ok, "the event is on the pod")
	assert.Equal(t, pod.UID, got.UID)

	// Another manifest makes the directory be read again.
	writeAtomic(t, filepath.Join(dir, "other.yaml"), manifest("other", "i:1"))
	require.Len(t, h.next(), 2)
	assert.Len(t, h.rec.Events(), 1, "the same content is reported once")
}

func TestMisspelledContainersIsNamedInTheValidationError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pod.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(manifest("typo", "i:1"), "containers:", "containres:", 1)), 0o644))
	h := newHarness(t, dir, nil)
	h.start()
	assert.Empty(t, h.next())
	require.Eventually(t, func() bool { return len(h.rec.Events()) == 1 }, waitTimeout, time.Millisecond)
	e := h.rec.Events()[0]
	assert.Equal(t, podconfig.ReasonFailedValidation, e.Reason)
	assert.Contains(t, e.Message, "spec.containers: Required value")
	assert.Contains(t, e.Message, `unknown field "spec.containres"`)
}
