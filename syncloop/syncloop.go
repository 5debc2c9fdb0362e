package syncloop

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podconfig"
)

// ErrInvalidConfig is wrapped by New and Run when given something unusable.
var ErrInvalidConfig = errors.New("syncloop: invalid config")

// Back-off while the runtime reports errors, as in the kubelet.
const (
	runtimeBackOffBase = 100 * time.Millisecond
	runtimeBackOffMax  = 5 * time.Second
)

// Handler acts on what the loop dispatches; the agent implements it,
// usually by feeding its pod manager and the pod workers. The loop calls one
// method at a time, from the goroutine running Run. A panic in a method is
// recovered and logged; the loop goes on.
type Handler interface {
	// HandlePodAdditions gets pods new to a source (ADD).
	HandlePodAdditions(ctx context.Context, pods []*v1.Pod)
	// HandlePodUpdates gets pods whose spec changed (UPDATE) or whose
	// graceful deletion began (DELETE).
	HandlePodUpdates(ctx context.Context, pods []*v1.Pod)
	// HandlePodRemoves gets pods gone from their source (REMOVE).
	HandlePodRemoves(ctx context.Context, pods []*v1.Pod)
	// HandlePodReconcile gets pods whose status alone changed (RECONCILE).
	HandlePodReconcile(ctx context.Context, pods []*v1.Pod)
	// HandlePodSyncs gets pods to sync again: due in the work queue, or
	// changed on the runtime (PLEG events).
	HandlePodSyncs(ctx context.Context, pods []*v1.Pod)
	// HandlePodCleanups is housekeeping: kill orphaned pods, forget finished
	// workers (podworkers.SyncKnownPods), remove orphaned mirror pods. It runs
	// only once all sources are ready.
	HandlePodCleanups(ctx context.Context) error
}

// ContainerCleaner may be implemented by a Handler: the loop then calls it
// on every ContainerDied event, to remove the pod's dead containers beyond
// what must be kept.
type ContainerCleaner interface {
	CleanUpContainersInPod(ctx context.Context, podUID types.UID, exitedContainerID string)
}

// PodGetter finds a pod the agent knows by UID (the agent's pod manager).
type PodGetter interface {
	GetPodByUID(uid types.UID) (*v1.Pod, bool)
}

// DuePods hands out the UIDs of pods due for a resync, on every sync tick
// (the draining side of podworkers.Queue, whose workers schedule the
// resyncs through podworkers.ResyncQueue).
type DuePods interface {
	GetWork() []types.UID
}

// UpdateSource is the PodConfig whose Updates() Run is given
// (*podconfig.PodConfig): New asks it for its mode.
type UpdateSource interface {
	Mode() podconfig.NotificationMode
}

// SourcesReady tracks the config sources heard from
// (*podconfig.SourcesReady).
type SourcesReady interface {
	AddSource(source string)
	AllReady() bool
}

// Config configures a Loop.
type Config struct {
	// Pods resolves the UIDs of PLEG events and due work. Required.
	Pods PodGetter
	// Source is the PodConfig whose Updates() Run is given. Optional, but
	// set it: New refuses a PodConfig not in podconfig.Incremental mode,
	// whose SETs the loop cannot dispatch (without Source, Run logs and
	// drops each SET).
	Source UpdateSource
	// PLEG is the PLEG's Watch() channel. Optional: without it the loop
	// learns of runtime changes only through resyncs.
	PLEG <-chan pleg.PodLifecycleEvent
	// DuePods is drained on every sync tick. Optional.
	DuePods DuePods
	// SourcesReady gates housekeeping and learns each update's source.
	// Default: housekeeping always runs.
	SourcesReady SourcesReady
	// RuntimeErrors reports why the runtime cannot be used right now (the
	// runtime's Status, PLEG health), or nil. While it returns an error the
	// loop dispatches nothing and retries after a back-off growing from
	// 100ms to 5s. Default: always healthy.
	RuntimeErrors func() error
	// SyncPeriod is how often due work is drained. Default 1s.
	SyncPeriod time.Duration
	// HousekeepingPeriod is how often HandlePodCleanups runs. Default 2s.
	HousekeepingPeriod time.Duration
	// HousekeepingWarning is how long housekeeping may take before a
	// warning is logged. Default 1s.
	HousekeepingWarning time.Duration
	// Clock drives the ticks and back-off. Default: the real clock.
	Clock clock.WithTicker
	// Log receives the loop's logs. Default: logr.Discard().
	Log logr.Logger
}

// Loop is the main loop of a node agent. Create it with New, run it with
// Run.
type Loop struct {
	c Config
	// lastEntry is when the loop last entered or left an iteration, in Unix
	// nanoseconds of Clock; a health check compares it with the time.
	lastEntry atomic.Int64
}

// New checks c and fills its defaults.
func New(c Config) (*Loop, error) {
	if c.Pods == nil {
		return nil, fmt.Errorf("%w: Pods is required", ErrInvalidConfig)
	}
	if c.Source != nil {
		if m := c.Source.Mode(); m != podconfig.Incremental {
			return nil, fmt.Errorf("syncloop: podconfig in %v mode: the loop needs podconfig.Incremental updates (it cannot dispatch a SET): %w", m, ErrInvalidConfig)
		}
	}
	if c.SyncPeriod < 0 || c.HousekeepingPeriod < 0 || c.HousekeepingWarning < 0 {
		return nil, fmt.Errorf("%w: negative period", ErrInvalidConfig)
	}
	if c.SyncPeriod == 0 {
		c.SyncPeriod = time.Second
	}
	if c.HousekeepingPeriod == 0 {
		c.HousekeepingPeriod = 2 * time.Second
	}
	if c.HousekeepingWarning == 0 {
		c.HousekeepingWarning = time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return &Loop{c: c}, nil
}

// LatestLoopEntryTime returns when the loop last started or finished an
// iteration, zero before the first; a health check can report the loop
// stuck if it lies too far back.
func (l *Loop) LatestLoopEntryTime() time.Time {
	ns := l.lastEntry.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Run dispatches to h until ctx ends or updates is closed, then returns nil.
// Each iteration waits for one of: a config update, a PLEG event, a sync tick
// or a housekeeping tick, and hands it to h.
func (l *Loop) Run(ctx context.Context, updates <-chan podconfig.PodUpdate, h Handler) error {
	if h == nil {
		return fmt.Errorf("%w: nil Handler", ErrInvalidConfig)
	}
	syncTicker := l.c.Clock.NewTicker(l.c.SyncPeriod)
	defer syncTicker.Stop()
	hkTicker := l.c.Clock.NewTicker(l.c.HousekeepingPeriod)
	defer hkTicker.Stop()

	it := &iteration{l: l, h: h, updates: updates, plegCh: l.c.PLEG,
		syncCh: syncTicker.C(), housekeepingCh: hkTicker.C()}
	it.cleaner, _ = h.(ContainerCleaner)

	delay := runtimeBackOffBase
	for {
		if ctx.Err() != nil {
			return nil
		}
		if l.c.RuntimeErrors != nil {
			if err := l.c.RuntimeErrors(); err != nil {
				l.c.Log.Error(err, "Skipping pod synchronization", "retryIn", delay)
				select {
				case <-ctx.Done():
					return nil
				case <-l.c.Clock.After(delay):
				}
				delay = min(2*delay, runtimeBackOffMax)
				continue
			}
		}
		delay = runtimeBackOffBase
		l.lastEntry.Store(l.c.Clock.Now().UnixNano())
		if !it.run(ctx) {
			return nil
		}
		l.lastEntry.Store(l.c.Clock.Now().UnixNano())
	}
}

// iteration holds the channels one Run selects on.
type iteration struct {
	l              *Loop
	h              Handler
	cleaner        ContainerCleaner
	updates        <-chan podconfig.PodUpdate
	plegCh         <-chan pleg.PodLifecycleEvent
	syncCh         <-chan time.Time
	housekeepingCh <-chan time.Time
	// plegHeld: pods whose sync waits for their relist's last event.
	plegHeld map[types.UID]struct{}
}

// run waits for one event and dispatches it; false ends the loop.
//
// Of the events ready at once it takes the PLEG's first, then a config
// update, then the sync tick, then housekeeping, where a bare select would
// pick one at random. On virtual time many arrive in one instant, and a
// random pick made simulations diverge: a restarted agent's first relist
// reports the pods it finds running before its sources have added them, and
// whether those events were dropped (the pod unknown yet, as the kubelet's
// first relist usually is) or made a second sync depended on the pick.
func (it *iteration) run(ctx context.Context) bool {
	select {
	case e, open := <-it.plegCh:
		return it.onPLEG(ctx, e, open)
	default:
	}
	select {
	case u, open := <-it.updates:
		return it.onUpdate(ctx, u, open)
	default:
	}
	select {
	case <-it.syncCh:
		return it.onSync(ctx)
	default:
	}
	select {
	case <-ctx.Done():
		return false
	case e, open := <-it.plegCh:
		return it.onPLEG(ctx, e, open)
	case u, open := <-it.updates:
		return it.onUpdate(ctx, u, open)
	case <-it.syncCh:
		return it.onSync(ctx)
	case <-it.housekeepingCh:
		return it.onHousekeeping(ctx)
	}
}

func (it *iteration) onUpdate(ctx context.Context, u podconfig.PodUpdate, open bool) bool {
	l, h, log := it.l, it.h, it.l.c.Log
	if !open {
		log.Info("Update channel closed, sync loop ends")
		return false
	}
	switch u.Op {
	case podconfig.ADD:
		it.call("HandlePodAdditions", func() { h.HandlePodAdditions(ctx, u.Pods) })
	case podconfig.UPDATE, podconfig.DELETE:
		it.call("HandlePodUpdates", func() { h.HandlePodUpdates(ctx, u.Pods) })
	case podconfig.REMOVE:
		it.call("HandlePodRemoves", func() { h.HandlePodRemoves(ctx, u.Pods) })
	case podconfig.RECONCILE:
		it.call("HandlePodReconcile", func() { h.HandlePodReconcile(ctx, u.Pods) })
	default:
		// SET is what podconfig sends in snapshot mode; the loop needs
		// the incremental notifications.
		log.Error(fmt.Errorf("unsupported pod update %v", u.Op), "Dropping update", "source", u.Source)
	}
	if s := l.c.SourcesReady; s != nil {
		s.AddSource(u.Source)
	}
	return true
}

func (it *iteration) onPLEG(ctx context.Context, e pleg.PodLifecycleEvent, open bool) bool {
	l, h := it.l, it.h
	if !open {
		it.plegCh = nil // keep going without the PLEG rather than spin
		l.c.Log.Info("PLEG channel closed")
		return true
	}
	// One relist's events of a pod make one sync, at the last (see
	// pleg.PodLifecycleEvent.More).
	sync := e.Type != pleg.ContainerRemoved
	if _, held := it.plegHeld[e.ID]; held && !e.More {
		delete(it.plegHeld, e.ID)
		sync = true
	}
	if sync && e.More {
		if it.plegHeld == nil {
			it.plegHeld = map[types.UID]struct{}{}
		}
		it.plegHeld[e.ID] = struct{}{}
		sync = false
	}
	if sync {
		if pod, ok := l.c.Pods.GetPodByUID(e.ID); ok {
			it.call("HandlePodSyncs", func() { h.HandlePodSyncs(ctx, []*v1.Pod{pod}) })
		}
	}
	if e.Type == pleg.ContainerDied && it.cleaner != nil && e.ContainerID != "" {
		it.call("CleanUpContainersInPod", func() { it.cleaner.CleanUpContainersInPod(ctx, e.ID, e.ContainerID) })
	}
	return true
}

func (it *iteration) onSync(ctx context.Context) bool {
	if pods := it.podsToSync(); len(pods) > 0 {
		it.call("HandlePodSyncs", func() { it.h.HandlePodSyncs(ctx, pods) })
	}
	return true
}

func (it *iteration) onHousekeeping(ctx context.Context) bool {
	l, h, log := it.l, it.h, it.l.c.Log
	if s := l.c.SourcesReady; s != nil && !s.AllReady() {
		log.V(4).Info("Housekeeping skipped: sources not ready")
		return true
	}
	start := l.c.Clock.Now()
	it.call("HandlePodCleanups", func() {
		if err := h.HandlePodCleanups(ctx); err != nil {
			log.Error(err, "Housekeeping failed")
		}
	})
	if d := l.c.Clock.Since(start); d > l.c.HousekeepingWarning {
		log.Info("Housekeeping took longer than expected", "expected", l.c.HousekeepingWarning, "actual", d)
	}
	return true
}

// podsToSync returns the known pods due in the work queue.
func (it *iteration) podsToSync() []*v1.Pod {
	if it.l.c.DuePods == nil {
		return nil
	}
	uids := it.l.c.DuePods.GetWork()
	if len(uids) == 0 {
		return nil
	}
	pods := make([]*v1.Pod, 0, len(uids))
	for _, uid := range uids {
		if pod, ok := it.l.c.Pods.GetPodByUID(uid); ok {
			pods = append(pods, pod)
		}
	}
	return pods
}

// call runs one handler method, logging a panic instead of dying of it.
func (it *iteration) call(name string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			it.l.c.Log.Error(fmt.Errorf("%v", r), "Handler panicked", "method", name)
		}
	}()
	fn()
}
