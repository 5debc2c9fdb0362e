package podconfig

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// ErrInvalidConfig is wrapped by the errors of constructors given bad
// configuration.
var ErrInvalidConfig = errors.New("podconfig: invalid config")

// NotificationMode is how PodConfig reports changes on its output channel.
type NotificationMode int

const (
	// Incremental delivers REMOVE, ADD, UPDATE, DELETE and RECONCILE
	// updates, in that order per merge; a source's first SET that changes
	// nothing is reported as an empty ADD so the source still reports in.
	Incremental NotificationMode = iota + 1
	// Snapshot delivers every pod of every source as a SET whenever
	// anything changes.
	Snapshot
	// SnapshotAndUpdates delivers a SET of every pod when pods are added or
	// removed, and UPDATE and DELETE for changed pods.
	SnapshotAndUpdates
)

// String returns the mode's name, as in the constant.
func (m NotificationMode) String() string {
	switch m {
	case Incremental:
		return "Incremental"
	case Snapshot:
		return "Snapshot"
	case SnapshotAndUpdates:
		return "SnapshotAndUpdates"
	}
	return fmt.Sprintf("NotificationMode(%d)", int(m))
}

// Options configure a PodConfig. The zero value is usable.
type Options struct {
	// Log receives the mux's logs. Defaults to logr.Discard().
	Log logr.Logger
	// Clock stamps the config.seen annotation of new pods. Defaults to the
	// real clock.
	Clock clock.PassiveClock
	// Recorder receives FailedValidation events for pods dropped for a
	// duplicate name. Defaults to a recorder that drops events.
	Recorder EventRecorder
	// CopyPods makes every delivered pod a deep copy, as the kubelet does.
	// By default the consumer receives the stored pods themselves, shared
	// with later updates and with other consumers of them: treat them as
	// read-only (DeepCopy before modifying), as with an informer's cache.
	// nodekit's own components do (the agent's TestPodsAreNeverModified
	// checks), so an agent needs no copies. Copying costs about one
	// allocation per pod field; see the benchmarks.
	CopyPods bool
	// UpdatesBuffer is the capacity of the output channel. Defaults to 50,
	// as in the kubelet.
	UpdatesBuffer int
}

// PodConfig merges the pods of several sources into one ordered stream of
// PodUpdates. Each source writes PodUpdates to its own channel (Channel);
// the per-source storage turns them into the minimal changes, delivered on
// Updates() in the order they were merged.
type PodConfig struct {
	mode    NotificationMode
	storage *podStorage
	updates chan PodUpdate

	mu       sync.Mutex
	sources  map[string]struct{}       // every source ever registered
	channels map[string]chan PodUpdate // sources whose channel is being served
}

// NewPodConfig returns a PodConfig delivering in the given mode. It rejects
// an unknown mode or a negative buffer with an error wrapping
// ErrInvalidConfig.
func NewPodConfig(mode NotificationMode, opts Options) (*PodConfig, error) {
	switch mode {
	case Incremental, Snapshot, SnapshotAndUpdates:
	default:
		return nil, fmt.Errorf("podconfig: unsupported notification mode %v: %w", mode, ErrInvalidConfig)
	}
	if opts.UpdatesBuffer < 0 {
		return nil, fmt.Errorf("podconfig: UpdatesBuffer %d < 0: %w", opts.UpdatesBuffer, ErrInvalidConfig)
	}
	if opts.UpdatesBuffer == 0 {
		opts.UpdatesBuffer = 50
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Recorder == nil {
		opts.Recorder = nopRecorder{}
	}
	updates := make(chan PodUpdate, opts.UpdatesBuffer)
	return &PodConfig{
		mode:     mode,
		storage:  newPodStorage(updates, mode, opts),
		updates:  updates,
		sources:  map[string]struct{}{},
		channels: map[string]chan PodUpdate{},
	}, nil
}

// Channel returns the channel on which source sends its PodUpdates (the
// same channel for repeated calls) and registers source as one whose first
// SET SeenAllSources waits for. The update's Source field is ignored: the
// channel names the source. The channel is served until ctx ends; a later
// call returns a fresh channel. A source hands its pods over when it sends
// them and must not modify them afterwards.
func (c *PodConfig) Channel(ctx context.Context, source string) chan<- PodUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sources[source] = struct{}{}
	if ch, ok := c.channels[source]; ok {
		return ch
	}
	ch := make(chan PodUpdate)
	c.channels[source] = ch
	go c.listen(ctx, source, ch)
	return ch
}

// Sender registers source as Channel does and returns what merges its
// updates in the caller's goroutine instead of a channel's: a source that
// has a goroutine of its own (one reading a channel of the caller's, say)
// saves the listener's. send blocks until the update is merged and
// returns ctx's error if ctx ends first. The update's Source field is
// ignored; send may be called from several goroutines.
func (c *PodConfig) Sender(source string) (send func(ctx context.Context, u PodUpdate) error) {
	c.mu.Lock()
	c.sources[source] = struct{}{}
	c.mu.Unlock()
	return func(ctx context.Context, u PodUpdate) error { return c.storage.Merge(ctx, source, u) }
}

func (c *PodConfig) listen(ctx context.Context, source string, ch chan PodUpdate) {
	defer func() {
		c.mu.Lock()
		if c.channels[source] == ch {
			delete(c.channels, source)
		}
		c.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-ch:
			if err := c.storage.Merge(ctx, source, u); err != nil {
				return // ctx ended while delivering
			}
		}
	}
}

// Mode returns the NotificationMode the PodConfig delivers in, so that a
// consumer can refuse one it cannot handle (syncloop.New refuses all but
// Incremental).
func (c *PodConfig) Mode() NotificationMode { return c.mode }

// Updates returns the merged output. It is never closed.
func (c *PodConfig) Updates() <-chan PodUpdate {
	return c.updates
}

// Sync delivers a SET of every pod of every source (Source "*") on the
// output, after any merge in progress. It returns ctx's error if ctx ends
// before the SET was delivered.
func (c *PodConfig) Sync(ctx context.Context) error {
	return c.storage.Sync(ctx)
}

// SeenAllSources reports whether seen holds every registered source and
// each of them has sent at least one SET. The agent passes the sources it
// has received updates from (see SourcesReady).
func (c *PodConfig) SeenAllSources(seen sets.Set[string]) bool {
	c.mu.Lock()
	names := make([]string, 0, len(c.sources))
	for s := range c.sources {
		names = append(names, s)
	}
	c.mu.Unlock()
	sort.Strings(names)
	return seen.HasAll(names...) && c.storage.seenAll(names)
}
