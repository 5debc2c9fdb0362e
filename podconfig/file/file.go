package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/safeevent"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/internal/fieldwarn"
	"github.com/nodekit/nodekit/podconfig/staticpod"
	"github.com/nodekit/nodekit/podutil"
)

// ErrFileTooLarge: a manifest exceeds Config.MaxFileBytes.
var ErrFileTooLarge = errors.New("file: manifest file too large")

// Config configures a Source.
type Config struct {
	// Path is a directory of manifests or a single manifest file.
	// Required.
	Path string
	// NodeName names the node; static pods' names get it as a suffix.
	// Required.
	NodeName string
	// CheckFrequency is the period of the full re-read. Default 20s, as the
	// kubelet's file-check-frequency.
	CheckFrequency time.Duration
	// MaxFileBytes is the largest manifest accepted. Default 10 MiB, as in
	// the kubelet.
	MaxFileBytes int64
	// WatchRetryInitial is the first delay before re-creating a failed
	// watch; it doubles up to WatchRetryMax. Defaults 1s and 20s, as in the
	// kubelet.
	WatchRetryInitial, WatchRetryMax time.Duration
	// Clock ticks the re-reads and times the retries. Default the real
	// clock.
	Clock clock.WithTicker
	// Log receives the source's logs. Default logr.Discard().
	Log logr.Logger
	// Recorder receives a FailedValidation event on the node for each
	// manifest that cannot be used. Default none.
	Recorder podconfig.EventRecorder
}

// watcher is the part of *fsnotify.Watcher the source uses.
type watcher interface {
	Add(name string) error
	Close() error
	Events() <-chan fsnotify.Event
	Errors() <-chan error
}

type fsWatcher struct{ *fsnotify.Watcher }

func (w fsWatcher) Events() <-chan fsnotify.Event { return w.Watcher.Events }
func (w fsWatcher) Errors() <-chan error          { return w.Watcher.Errors }

func newFSWatcher() (watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return fsWatcher{w}, nil
}

// Source reads static pod manifests from disk; see the package doc.
type Source struct {
	c          Config
	node       *v1.ObjectReference
	newWatcher func() (watcher, error)

	// Owned by Run's goroutine.
	files map[string]*fileState
	sent  bool   // a SET was sent at least once
	root  string // the directory being watched
}

// fileState is what the source knows of one manifest. pod is the source's
// own copy: it sends deep copies, since the mux takes ownership of what it
// receives.
type fileState struct {
	data  []byte  // content last read
	pod   *v1.Pod // last good pod, nil if none
	valid bool    // data decoded into pod
}

// New validates c, fills its defaults and returns a Source. Bad config gets
// an error wrapping podconfig.ErrInvalidConfig.
func New(c Config) (*Source, error) {
	if c.Path == "" {
		return nil, fmt.Errorf("file: Path is required: %w", podconfig.ErrInvalidConfig)
	}
	if c.NodeName == "" {
		return nil, fmt.Errorf("file: NodeName is required: %w", podconfig.ErrInvalidConfig)
	}
	if c.CheckFrequency < 0 || c.MaxFileBytes < 0 || c.WatchRetryInitial < 0 || c.WatchRetryMax < 0 {
		return nil, fmt.Errorf("file: negative setting: %w", podconfig.ErrInvalidConfig)
	}
	c.Path = filepath.Clean(c.Path)
	if c.CheckFrequency == 0 {
		c.CheckFrequency = 20 * time.Second
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = 10 << 20
	}
	if c.WatchRetryInitial == 0 {
		c.WatchRetryInitial = time.Second
	}
	if c.WatchRetryMax == 0 {
		c.WatchRetryMax = 20 * time.Second
	}
	if c.WatchRetryMax < c.WatchRetryInitial {
		c.WatchRetryMax = c.WatchRetryInitial
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return &Source{
		c:          c,
		node:       &v1.ObjectReference{Kind: "Node", Name: c.NodeName, UID: types.UID(c.NodeName)},
		newWatcher: newFSWatcher,
		files:      map[string]*fileState{},
	}, nil
}

// Run reads the manifests, then follows them until ctx ends; then it
// returns nil. Run must not be called twice at once.
func (s *Source) Run(ctx context.Context, updates chan<- podconfig.PodUpdate) error {
	ticker := s.c.Clock.NewTicker(s.c.CheckFrequency)
	defer ticker.Stop()
	s.c.Log.V(1).Info("Watching path", "path", s.c.Path)

	backoff := s.newBackoff()
	var w watcher
	var events <-chan fsnotify.Event
	var errs <-chan error
	var retry clock.Timer
	var retryC <-chan time.Time
	defer func() {
		if w != nil {
			_ = w.Close()
		}
		if retry != nil {
			retry.Stop()
		}
	}()
	startWatch := func() {
		var err error
		w, err = s.watch()
		if err != nil {
			d := backoff.Step()
			s.c.Log.Error(err, "Unable to watch manifest path, retrying", "path", s.c.Path, "after", d)
			retry = s.c.Clock.NewTimer(d)
			retryC = retry.C()
			events, errs = nil, nil
			return
		}
		retry, retryC = nil, nil
		events, errs = w.Events(), w.Errors()
	}
	stopWatch := func() {
		if w != nil {
			_ = w.Close()
			w = nil
		}
		events, errs = nil, nil
	}

	startWatch()
	if !s.resync(ctx, updates) {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			if !s.resync(ctx, updates) {
				return nil
			}
		case <-retryC:
			startWatch()
			if w != nil && !s.resync(ctx, updates) { // catch up on the gap
				return nil
			}
		case err := <-errs:
			s.c.Log.Error(err, "Watch of manifest path failed", "path", s.c.Path)
			stopWatch()
			startWatch()
		case ev, ok := <-events:
			if !ok {
				stopWatch()
				startWatch()
				continue
			}
			if filepath.Clean(ev.Name) == s.root && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
				// The watched directory itself went away: watch again
				// once it is back, and report what is left now.
				stopWatch()
				startWatch()
				if !s.resync(ctx, updates) {
					return nil
				}
				continue
			}
			backoff = s.newBackoff()
			if changed := s.handleEvent(ev); changed && !s.send(ctx, updates) {
				return nil
			}
		}
	}
}

func (s *Source) newBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: s.c.WatchRetryInitial, Factor: 2, Cap: s.c.WatchRetryMax, Steps: math.MaxInt32}
}

// watchRoot is the directory to watch: Path itself, or a single file's
// directory, so that a file replaced by rename is still followed.
func (s *Source) watchRoot() string {
	if fi, err := os.Stat(s.c.Path); err == nil && !fi.IsDir() {
		return filepath.Dir(s.c.Path)
	}
	return s.c.Path
}

func (s *Source) watch() (watcher, error) {
	root := s.watchRoot()
	if _, err := os.Stat(root); err != nil {
		return nil, err
	}
	s.root = root
	w, err := s.newWatcher()
	if err != nil {
		return nil, fmt.Errorf("creating watcher: %w", err)
	}
	if err := w.Add(root); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("watching %s: %w", root, err)
	}
	return w, nil
}

// relevant reports whether a watch event's file is one of ours.
func (s *Source) relevant(name string) bool {
	if strings.HasPrefix(filepath.Base(name), ".") {
		return false
	}
	if name == s.c.Path {
		return true // the single file
	}
	return filepath.Dir(name) == s.c.Path
}

// handleEvent re-reads the file an event names and reports whether the set
// of pods changed. A file that fails to decode keeps its last good pod.
func (s *Source) handleEvent(ev fsnotify.Event) bool {
	name := filepath.Clean(ev.Name)
	if !s.relevant(name) {
		return false
	}
	fi, err := os.Stat(name)
	if err != nil || !fi.Mode().IsRegular() {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.c.Log.Error(err, "Could not stat manifest", "path", name)
			return false
		}
		st, ok := s.files[name]
		delete(s.files, name)
		return ok && st.pod != nil
	}
	data, err := s.read(name)
	if err != nil {
		s.report(name, err)
		return false
	}
	if len(data) == 0 {
		return false // being written; the next event or re-read has it
	}
	old := s.files[name]
	if old != nil && bytes.Equal(old.data, data) {
		return false
	}
	pod, err := s.decode(name, data)
	if err != nil {
		s.report(name, err)
		st := &fileState{data: data}
		if old != nil {
			st.pod = old.pod
		}
		s.files[name] = st
		return false
	}
	s.files[name] = &fileState{data: data, pod: pod, valid: true}
	return true
}

// resync re-reads every manifest and sends a SET if the pods changed (or on
// the first read). It returns false if ctx ended.
func (s *Source) resync(ctx context.Context, updates chan<- podconfig.PodUpdate) bool {
	next, err := s.readAll()
	if err != nil {
		s.c.Log.Error(err, "Unable to read manifest path", "path", s.c.Path)
		if s.sent {
			return true
		}
		next = map[string]*fileState{} // still report in, empty
	}
	changed := len(next) != len(s.files)
	for name, st := range next {
		if old, ok := s.files[name]; !ok || old.pod != st.pod {
			changed = true
		}
	}
	s.files = next
	if changed || !s.sent {
		return s.send(ctx, updates)
	}
	return true
}

// readAll reads Path into a fresh state, reusing the entries of unchanged
// files. A missing path is an empty state.
func (s *Source) readAll() (map[string]*fileState, error) {
	next := map[string]*fileState{}
	fi, err := os.Stat(s.c.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.c.Log.V(2).Info("Manifest path does not exist", "path", s.c.Path)
		return next, nil
	case err != nil:
		return nil, err
	case fi.Mode().IsRegular():
		s.load(next, s.c.Path)
		return next, nil
	case !fi.IsDir():
		return nil, fmt.Errorf("%s is not a directory or regular file", s.c.Path)
	}
	entries, err := os.ReadDir(s.c.Path)
	if err != nil {
		return nil, err
	}
	for _, e := range entries { // sorted by name
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		name := filepath.Join(s.c.Path, e.Name())
		fi, err := os.Stat(name) // follows symlinks
		switch {
		case err != nil:
			if !errors.Is(err, fs.ErrNotExist) {
				s.c.Log.Error(err, "Could not stat manifest", "path", name)
			}
		case fi.IsDir():
			s.c.Log.V(4).Info("Not recursing into subdirectory of the manifest path", "path", name)
		case fi.Mode().IsRegular():
			s.load(next, name)
		default:
			s.c.Log.Info("Manifest path is not a regular file, skipping", "path", name, "mode", fi.Mode().String())
		}
	}
	return next, nil
}

// load reads one manifest into next. An invalid one is reported once per
// content and left out.
func (s *Source) load(next map[string]*fileState, name string) {
	data, err := s.read(name)
	if err != nil {
		s.report(name, err)
		return
	}
	if old := s.files[name]; old != nil && bytes.Equal(old.data, data) {
		if old.valid {
			next[name] = old
		} else {
			next[name] = &fileState{data: data} // reported already; dropped now
		}
		return
	}
	pod, err := s.decode(name, data)
	if err != nil {
		s.report(name, err)
		next[name] = &fileState{data: data}
		return
	}
	next[name] = &fileState{data: data, pod: pod, valid: true}
}

func (s *Source) read(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, s.c.MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > s.c.MaxFileBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrFileTooLarge, s.c.MaxFileBytes)
	}
	return data, nil
}

func (s *Source) decode(name string, data []byte) (*v1.Pod, error) {
	ms, err := staticpod.DecodeStrict(data, false)
	if err != nil {
		return nil, err
	}
	if err := ms[0].Prepare(staticpod.Origin{Source: podutil.FileSource, Location: name, NodeName: s.c.NodeName}); err != nil {
		return nil, err
	}
	fieldwarn.Record(s.c.Recorder, s.c.Log, ms[0].Pod, name, ms[0].Warnings)
	return ms[0].Pod, nil
}

func (s *Source) report(name string, err error) {
	s.c.Log.Error(err, "Could not process manifest file", "path", name)
	if evErr := safeevent.Eventf(s.c.Recorder, s.node, v1.EventTypeWarning, podconfig.ReasonFailedValidation,
		"Could not process manifest file %s: %v", name, err); evErr != nil {
		s.c.Log.Error(evErr, "Recording event")
	}
}

// send sends the current pods, as deep copies in file name order.
func (s *Source) send(ctx context.Context, updates chan<- podconfig.PodUpdate) bool {
	names := make([]string, 0, len(s.files))
	for name, st := range s.files {
		if st.pod != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	pods := make([]*v1.Pod, len(names))
	for i, name := range names {
		pods[i] = s.files[name].pod.DeepCopy()
	}
	select {
	case updates <- podconfig.PodUpdate{Pods: pods, Op: podconfig.SET, Source: podutil.FileSource}:
		s.sent = true
		return true
	case <-ctx.Done():
		return false
	}
}
