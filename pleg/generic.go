package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// GenericPLEG generates pod lifecycle events by relisting the runtime
// periodically and comparing each listing with the last one it acted on. It
// assumes, like the kubelet's, that a container is not created, finished and
// removed within one relist period; the sync loop's periodic resync is the
// safety net for what it misses.
type GenericPLEG struct {
	runtime  RuntimeLister
	listed   runtime.ListedPodInspector // runtime, if it can inspect a listed pod; else nil
	cache    runtime.Cache
	clock    clock.WithDelayedExecution
	log      logr.Logger
	onRelist func(RelistStats)
	metrics  *relistMetrics // nil: none

	parallelism    int
	inspectTimeout time.Duration

	events chan PodLifecycleEvent

	period, threshold atomic.Int64 // time.Duration
	// retryPeriod, if set and shorter than period (NewEvented sets its
	// normal period, shorter than the slow streaming one), is the wait after a
	// relist that failed or left pods to reinspect: nothing else refreshes
	// those pods' cache entries, and a stale error entry would fail their
	// workers' syncs until the next slow relist.
	retryPeriod   atomic.Int64 // time.Duration; 0: none
	incomplete    atomic.Bool  // the last relist failed or left pods to reinspect
	periodChanged chan struct{}
	running       atomic.Bool
	// requested: a relist was asked for (RequestRelist) since the last one
	// began; Run relists once minInterval has passed since the last ended.
	requested   atomic.Bool
	minInterval time.Duration

	// lastMu guards lastRelist, the start of the last relist whose GetPods
	// succeeded.
	lastMu     sync.Mutex
	lastRelist time.Time

	// relistMu serializes relists; it guards everything below.
	relistMu sync.Mutex
	gen      uint64
	records  map[types.UID]*podRecord
	// reinspect holds the pods whose inspection failed in the last relist.
	reinspect map[types.UID]struct{}
	// order holds the record of each pod of the last listing, by index.
	order []*podRecord
	// items and buf are reused from relist to relist.
	items []item
	buf   []PodLifecycleEvent
}

// item is one pod to act on in a relist: inspect it (or forget it if pod is
// nil), then send buf[first:last]. Each item is touched by one worker only.
type item struct {
	pid         types.UID
	rec         *podRecord
	pod         *runtime.Pod
	first, last int32

	ok      bool
	sent    [3]int32 // by eventIndex
	dropped int32
	// stale: the cache kept what it held, newer by its timestamp than this
	// relist (an event of the stream written meanwhile), so the listing is
	// not remembered and the next relist inspects the pod again.
	stale bool
}

// eventIndex numbers the event types item.sent counts.
func eventIndex(t PodLifecycleEventType) int {
	switch t {
	case ContainerStarted:
		return 0
	case ContainerDied:
		return 1
	default:
		return 2
	}
}

// New returns a GenericPLEG for c, or an error wrapping
// runtime.ErrInvalidConfig. It does not relist until Run or Relist.
func New(c Config) (*GenericPLEG, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &GenericPLEG{
		runtime:        c.Runtime,
		cache:          c.Cache,
		clock:          c.Clock,
		log:            c.Log.WithName("pleg"),
		onRelist:       c.OnRelist,
		parallelism:    c.InspectParallelism,
		minInterval:    c.MinRelistInterval,
		inspectTimeout: c.InspectTimeout,
		events:         make(chan PodLifecycleEvent, c.EventChannelCapacity),
		periodChanged:  make(chan struct{}, 1),
		records:        make(map[types.UID]*podRecord),
		reinspect:      make(map[types.UID]struct{}),
	}
	g.listed, _ = c.Runtime.(runtime.ListedPodInspector)
	if g.metrics, err = newRelistMetrics(c.Registerer); err != nil {
		return nil, err
	}
	g.period.Store(int64(c.RelistPeriod))
	g.threshold.Store(int64(c.RelistThreshold))
	return g, nil
}

// Watch returns the channel of events. It is never closed; one consumer
// reads it.
func (g *GenericPLEG) Watch() <-chan PodLifecycleEvent { return g.events }

// SetRelistDuration changes the relist period and the health threshold. A
// running Run applies the new period at once, counted from the end of the
// last relist. Both must be positive.
func (g *GenericPLEG) SetRelistDuration(period, threshold time.Duration) error {
	if period <= 0 || threshold <= 0 {
		return fmt.Errorf("pleg: relist period %v and threshold %v must be positive: %w", period, threshold, runtime.ErrInvalidConfig)
	}
	g.period.Store(int64(period))
	g.threshold.Store(int64(threshold))
	g.wake()
	return nil
}

// wake makes a waiting Run re-read its period.
func (g *GenericPLEG) wake() {
	select {
	case g.periodChanged <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// RequestRelist asks Run for a relist soon: MinRelistInterval after the
// last relist ended rather than a whole period after. Requests made before
// that relist begins are served by it; one made while it runs gets another.
// The agent asks after it started containers, so that their start reaches
// the cache, the pod workers and the API status at once rather than up to a
// relist period later, which is where the kubelet leaves it (an evented
// PLEG's stream carries the start as it happens). Without Run it does
// nothing.
func (g *GenericPLEG) RequestRelist() {
	g.requested.Store(true)
	g.wake()
}

// nextPeriod is the wait between relists: the period, or the retry period
// if shorter and the last relist was incomplete, or the minimum interval if
// a relist was requested.
func (g *GenericPLEG) nextPeriod() time.Duration {
	d := time.Duration(g.period.Load())
	if r := time.Duration(g.retryPeriod.Load()); r > 0 && g.incomplete.Load() {
		d = min(d, r)
	}
	if g.requested.Load() {
		d = min(d, g.minInterval)
	}
	return d
}

// Healthy returns nil if the last successful relist began within the
// threshold, else an error saying why not. It fits node.HealthCheck and
// server.HealthCheck as it is.
func (g *GenericPLEG) Healthy() error {
	g.lastMu.Lock()
	last := g.lastRelist
	g.lastMu.Unlock()
	if last.IsZero() {
		return errors.New("pleg has yet to be successful")
	}
	threshold := time.Duration(g.threshold.Load())
	if elapsed := g.clock.Since(last); elapsed > threshold {
		return fmt.Errorf("pleg was last seen active %v ago; threshold is %v", elapsed, threshold)
	}
	return nil
}

// Run relists at once and then every relist period until ctx ends, and
// returns nil after the last relist has finished. It blocks: run it in a
// goroutine of its own. A second Run while one runs returns
// ErrAlreadyStarted.
func (g *GenericPLEG) Run(ctx context.Context) error {
	if !g.running.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	defer g.running.Store(false)
	for ctx.Err() == nil {
		g.requested.Store(false) // this relist serves what was asked so far
		_ = g.Relist(ctx)        // logged and reported by relist
		end := g.clock.Now()
		for {
			d := g.nextPeriod() - g.clock.Since(end)
			if d <= 0 {
				break
			}
			t := g.clock.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			case <-g.periodChanged:
				t.Stop()
			}
		}
	}
	return nil
}

// Relist lists the runtime once, inspects the pods that changed, writes their
// status to the cache and sends their events. It returns the error of GetPods
// or ctx's; inspection errors are logged, and those pods are inspected again
// at the next relist. Relists are serialized.
func (g *GenericPLEG) Relist(ctx context.Context) error {
	g.relistMu.Lock()
	defer g.relistMu.Unlock()
	st := RelistStats{Timestamp: g.clock.Now()}
	err := g.relist(ctx, &st)
	st.Err = err
	incomplete := err != nil || len(g.reinspect) > 0
	if was := g.incomplete.Swap(incomplete); incomplete && !was {
		g.wake() // a waiting Run re-times its wait with the retry period
	}
	st.Duration = g.clock.Since(st.Timestamp)
	if g.metrics != nil {
		g.lastMu.Lock()
		listed := g.lastRelist.Equal(st.Timestamp)
		g.lastMu.Unlock()
		g.metrics.observe(&st, listed)
	}
	g.report(&st)
	return err
}

func (g *GenericPLEG) report(st *RelistStats) {
	if g.onRelist == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			g.log.Error(fmt.Errorf("panic: %v", r), "OnRelist hook panicked")
		}
	}()
	g.onRelist(*st)
}

func (g *GenericPLEG) relist(ctx context.Context, st *RelistStats) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	pods, err := g.runtime.GetPods(ctx, true)
	if err != nil {
		g.log.Error(err, "Unable to list pods")
		return fmt.Errorf("pleg: listing pods: %w", err)
	}
	g.lastMu.Lock()
	g.lastRelist = st.Timestamp
	g.lastMu.Unlock()

	g.gen++
	gen := g.gen
	g.items, g.buf = g.items[:0], g.buf[:0]
	var slab []podRecord
	var states []ctrState
	if len(g.records) == 0 && len(pods) > 0 {
		// First relist: every pod is new. Size for it instead of growing
		// (events: two per pod to start with). The listing is read once,
		// in the loop below: at 10,000 pods it no longer fits in a core's
		// cache, and a pass of its own to count it cost as much again.
		slab = make([]podRecord, len(pods))
		g.records = make(map[types.UID]*podRecord, len(pods))
		if r, ok := g.cache.(reserver); ok {
			r.Reserve(len(pods))
		}
		g.items = make([]item, 0, len(pods))
		g.buf = make([]PodLifecycleEvent, 0, 2*len(pods))
	}
	sandboxes := 0
	matched := 0
	// A runtime lists its pods in the same order from relist to relist
	// (runtime/cri sorts them): a pod found where the last listing had it
	// needs no map lookup, and the records are read in order. order[i] is
	// the record of the last listing's pods[i]; it is rewritten in place,
	// each entry after it was read.
	prev := g.order
	if cap(prev) < len(pods) {
		g.order = make([]*podRecord, 0, len(pods))
	} else {
		g.order = prev[:0]
	}
	for i, pod := range pods {
		if pod == nil {
			g.order = append(g.order, nil)
			continue
		}
		countPod(st, pod)
		sandboxes += len(pod.Sandboxes)
		var rec *podRecord
		if i < len(prev) && prev[i] != nil && prev[i].uid == pod.ID {
			rec = prev[i]
		} else {
			rec = g.records[pod.ID]
		}
		if rec == nil {
			if len(slab) > 0 {
				rec, slab = &slab[0], slab[1:]
			} else {
				rec = &podRecord{}
			}
			rec.uid = pod.ID
			g.records[pod.ID] = rec
		} else if rec.seen == gen {
			g.log.Error(nil, "Runtime listed a pod twice; ignoring the second", "podUID", pod.ID)
			g.order = append(g.order, nil)
			continue
		}
		g.order = append(g.order, rec)
		rec.seen = gen
		matched++
		g.collect(pod.ID, rec, pod)
	}
	if matched != len(g.records) { // some pods are gone
		for pid, rec := range g.records {
			if rec.seen == gen {
				continue
			}
			if _, re := g.reinspect[pid]; !rec.known && !re {
				delete(g.records, pid) // never acted on: nothing to undo
				continue
			}
			g.collect(pid, rec, nil)
		}
	}
	clear(g.reinspect)

	if slab != nil {
		// The records' container states, in one piece.
		states = make([]ctrState, 0, st.Containers.total()+sandboxes)
	}
	if len(g.items) > 0 {
		g.inspectAll(ctx, st.Timestamp)
	}
	for i := range g.items {
		it := &g.items[i]
		st.Events.Started += int(it.sent[0])
		st.Events.Died += int(it.sent[1])
		st.Events.Removed += int(it.sent[2])
		st.Dropped += int(it.dropped)
		if it.pod != nil {
			st.Inspected++
		}
		switch {
		case !it.ok:
			st.InspectErrors++
			g.reinspect[it.pid] = struct{}{}
		case it.stale:
			// What this relist saw is not what the cache holds: had it
			// remembered the listing, the next relist would find it
			// unchanged and declare the cache current with the stream's
			// older status in it (a sync then acts on status from before
			// itself and starts a container again).
			g.reinspect[it.pid] = struct{}{}
		case it.pod == nil:
			delete(g.records, it.pid)
		default:
			n := len(it.pod.Containers) + len(it.pod.Sandboxes)
			dst := it.rec.old
			switch {
			case cap(dst) >= n: // reuse the record's own storage
			case cap(states)-len(states) >= n:
				dst = states[len(states) : len(states)+n : len(states)+n]
				states = states[:len(states)+n]
			default:
				dst = make([]ctrState, 0, n)
			}
			it.rec.remember(it.pod, dst)
		}
		it.rec, it.pod = nil, nil // let the listing be collected
	}
	if st.Dropped > 0 {
		g.log.Error(nil, "Event channel is full; events dropped", "dropped", st.Dropped)
	}
	if err := ctx.Err(); err != nil {
		// Some pods were not inspected; the cache is not current.
		return err
	}
	// Only now is every changed pod in the cache as of the relist's start.
	g.cache.UpdateTime(st.Timestamp)
	return nil
}

// reserver is a cache that can make room for a number of pods at once
// (runtime.NewCache's can).
type reserver interface{ Reserve(n int) }

func countPod(st *RelistStats, pod *runtime.Pod) {
	st.Pods++
	for _, c := range pod.Containers {
		switch c.State {
		case runtime.ContainerStateRunning:
			st.Containers.Running++
		case runtime.ContainerStateExited:
			st.Containers.Exited++
		case runtime.ContainerStateCreated:
			st.Containers.Created++
		default:
			st.Containers.Unknown++
		}
	}
	for _, s := range pod.Sandboxes {
		if s.State == runtime.ContainerStateRunning {
			st.RunningPods++
			break
		}
	}
}

// collect queues pid if its listing changed since the record's or its last
// inspection failed. pod is nil for a pod that is no longer listed.
func (g *GenericPLEG) collect(pid types.UID, rec *podRecord, pod *runtime.Pod) {
	first := len(g.buf)
	if !rec.same(pod) {
		g.buf = appendEvents(g.buf, pid, rec, pod)
	}
	if len(g.buf) == first && pod != nil {
		if _, re := g.reinspect[pid]; !re {
			return
		}
	}
	g.items = append(g.items, item{pid: pid, rec: rec, pod: pod, first: int32(first), last: int32(len(g.buf))})
}

// inspectAll acts on every item, with up to g.parallelism at a time once
// inspections prove slow. It starts serially on the relist's goroutine:
// in-memory inspections take a microsecond, and helper goroutines would only
// add their start-up and contention (measured slower than serial). A timer
// checks after inspectAdaptAfter: if no inspection has finished (a slow or
// hung runtime) the helpers start at once; otherwise the relist's goroutine
// starts them at its next item if inspections took inspectSlowItem or more
// each, else re-arms the timer.
func (g *GenericPLEG) inspectAll(ctx context.Context, ts time.Time) {
	workers := min(g.parallelism, len(g.items))
	in := inspector{g: g, parent: ctx}
	defer in.close()
	if workers <= 1 {
		for i := range g.items {
			g.process(ctx, &in, &g.items[i], ts)
		}
		return
	}
	a := &adaptive{g: g, ctx: ctx, ts: ts, helpers: workers - 1}
	start := g.clock.Now()
	// The fake clock runs timer callbacks under its own lock: fired must not
	// call the clock, and the clock is never called with a.mu held.
	timer := g.clock.AfterFunc(inspectAdaptAfter, a.fired)
	for {
		i := int(a.next.Add(1)) - 1
		if i >= len(g.items) {
			break
		}
		g.process(ctx, &in, &g.items[i], ts)
		a.done.Add(1)
		if a.check.Load() {
			a.check.Store(false)
			if g.clock.Since(start) >= time.Duration(a.done.Load())*inspectSlowItem {
				a.spawn()
			} else {
				timer.Reset(inspectAdaptAfter)
			}
		}
	}
	a.mu.Lock()
	a.finished = true
	a.mu.Unlock()
	timer.Stop()
	a.wg.Wait()
}

const (
	// inspectAdaptAfter is how long a relist's inspections run serially
	// before their pace is checked.
	inspectAdaptAfter = time.Millisecond
	// inspectSlowItem is the pace from which inspections run in parallel:
	// a runtime call (CRI over gRPC takes 100 µs or more), not memory.
	inspectSlowItem = 20 * time.Microsecond
)

// adaptive is one relist's inspection pass; see inspectAll.
type adaptive struct {
	g       *GenericPLEG
	ctx     context.Context
	ts      time.Time
	helpers int

	next, done atomic.Int64 // items taken, items finished
	check      atomic.Bool  // the timer fired with progress: pace to check
	wg         sync.WaitGroup

	mu       sync.Mutex // guards what follows and orders spawn before wg.Wait
	spawned  bool
	finished bool
}

func (a *adaptive) fired() {
	if a.done.Load() == 0 {
		a.spawn() // not one inspection done yet: slow or hung
		return
	}
	a.check.Store(true)
}

func (a *adaptive) spawn() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.spawned || a.finished {
		return
	}
	a.spawned = true
	for range a.helpers {
		a.wg.Go(a.help)
	}
}

func (a *adaptive) help() {
	in := inspector{g: a.g, parent: a.ctx}
	defer in.close()
	for {
		i := int(a.next.Add(1)) - 1
		if i >= len(a.g.items) {
			return
		}
		a.g.process(a.ctx, &in, &a.g.items[i], a.ts)
		a.done.Add(1)
	}
}

// process inspects one pod, writes the cache and sends the pod's events.
func (g *GenericPLEG) process(ctx context.Context, in *inspector, it *item, ts time.Time) {
	if it.pod == nil {
		g.log.V(4).Info("Pod is gone; deleting its status", "podUID", it.pid)
		g.cache.Delete(it.pid)
		it.ok = true
		g.send(it, nil)
		return
	}
	status, err := in.inspect(it.pod)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: the error says nothing about the pod
		}
		g.log.Error(err, "Unable to inspect pod; ignoring its events until the next relist", "pod", podRef(it.pod))
		if status == nil {
			status = &runtime.PodStatus{ID: it.pid, Name: it.pod.Name, Namespace: it.pod.Namespace}
		}
		g.cache.Set(it.pid, status, err, ts)
		return
	}
	if it.rec.known { // else no status of ours is cached to keep IPs from
		status = g.keepIPs(it.pid, status)
	}
	it.stale = !g.cache.Set(it.pid, status, nil, ts)
	it.ok = true
	g.send(it, status)
}

// inspector bounds one worker's inspections by the inspection timeout. Its
// context and timer are reused across inspections (a relist's worker
// inspects one pod after another): a new pair is made only after a timeout
// fired, since that cancels the context. Each timer's callback cancels the
// context made with it, so a late firing never touches a newer context.
type inspector struct {
	g      *GenericPLEG
	parent context.Context
	ctx    context.Context // nil until the first inspection and after a timeout
	cancel context.CancelCauseFunc
	timer  clock.Timer
}

// inspect calls GetPodStatus, bounded by the inspection timeout. A panic in
// the runtime becomes an error, since it runs on the PLEG's goroutine.
func (in *inspector) inspect(pod *runtime.Pod) (status *runtime.PodStatus, err error) {
	g := in.g
	if in.ctx == nil {
		ctx, cancel := context.WithCancelCause(in.parent)
		in.ctx, in.cancel = ctx, cancel
		in.timer = g.clock.AfterFunc(g.inspectTimeout, func() { cancel(ErrInspectionTimeout) })
	} else {
		in.timer.Reset(g.inspectTimeout)
	}
	ictx := in.ctx
	defer func() {
		if !in.timer.Stop() || ictx.Err() != nil {
			in.close() // fired or firing, or the parent is done: next gets a new pair
		}
		if r := recover(); r != nil {
			status, err = nil, fmt.Errorf("pleg: GetPodStatus panicked: %v", r)
		}
		if err != nil && errors.Is(context.Cause(ictx), ErrInspectionTimeout) {
			err = fmt.Errorf("%w after %v: %w", ErrInspectionTimeout, g.inspectTimeout, err)
		}
	}()
	if g.listed != nil {
		// pod is from this relist's GetPods(ctx, true): no need to list it again.
		status, err = g.listed.GetPodStatusListed(ictx, pod)
	} else {
		status, err = g.runtime.GetPodStatus(ictx, pod.ID, pod.Name, pod.Namespace)
	}
	if err == nil && status == nil {
		err = errors.New("pleg: runtime returned no status and no error")
	}
	return status, err
}

// close stops the timer and releases the context; the next inspection makes
// a new pair.
func (in *inspector) close() {
	if in.ctx == nil {
		return
	}
	in.timer.Stop()
	in.cancel(nil)
	in.ctx, in.cancel, in.timer = nil, nil, nil
}

// keepIPs keeps the cached IPs of a pod whose new status has none and no
// ready sandbox: a pod being torn down may be inspected after its network is
// gone, but its API status should keep the IPs it had.
func (g *GenericPLEG) keepIPs(pid types.UID, status *runtime.PodStatus) *runtime.PodStatus {
	if len(status.IPs) != 0 {
		return status
	}
	for _, s := range status.SandboxStatuses {
		if s.State == runtime.SandboxStateReady {
			return status
		}
	}
	old, err := g.cache.Get(pid)
	if err != nil || old == nil || len(old.IPs) == 0 {
		return status
	}
	kept := *status // the runtime's object stays as it was
	kept.IPs = old.IPs
	return &kept
}

// send sends the item's events without blocking; containerChanged is
// dropped silently, as the kubelet does: no consumer relies on it.
func (g *GenericPLEG) send(it *item, status *runtime.PodStatus) {
	evs := g.buf[it.first:it.last]
	last := -1 // the pod's last event sent, the one without More
	for i, e := range evs {
		if e.Type != containerChanged {
			last = i
		}
	}
	for i, e := range evs {
		if e.Type == containerChanged {
			continue
		}
		e.More = i < last
		select {
		case g.events <- e:
			it.sent[eventIndex(e.Type)]++
		default:
			it.dropped++ // counted in kubelet_pleg_discard_events by observe
		}
		if e.Type == ContainerDied && status != nil {
			if v := g.log.V(2); v.Enabled() {
				for _, c := range status.ContainerStatuses {
					if c.ID.String() == e.ContainerID {
						v.Info("Container finished", "pod", podRef(it.pod), "containerID", e.ContainerID, "exitCode", c.ExitCode)
						break
					}
				}
			}
		}
	}
}

func podRef(p *runtime.Pod) string {
	if p == nil {
		return ""
	}
	return p.Namespace + "/" + p.Name
}
