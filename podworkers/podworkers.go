package podworkers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// Jitter factors, as in the kubelet: a resync or retry lands up to 50% late,
// so pods created together do not stay in lockstep.
const (
	resyncJitterFactor  = 0.5
	backOffJitterFactor = 0.5
)

// Config configures PodWorkers.
type Config struct {
	// Syncer does the work. Required.
	Syncer PodSyncer
	// Cache is the runtime status cache the PLEG writes. Before each sync a
	// worker waits for status newer than the end of its previous sync.
	// Required.
	Cache runtime.Cache
	// ResyncQueue receives each pod's next resync. Default: a Queue on Clock
	// that nobody drains, so periodic resyncs only happen if the caller
	// shares a Queue with its sync loop.
	ResyncQueue ResyncQueue
	// ResyncInterval is how long after a successful sync a pod is due again
	// (the kubelet's syncFrequency), plus up to 50% jitter. Default 1m.
	ResyncInterval time.Duration
	// BackOff is how long after a failed sync the pod is due again, plus up
	// to 50% jitter. Default 10s.
	BackOff time.Duration
	// TransientBackOff replaces BackOff for errors wrapping ErrTransient.
	// Default 1s.
	TransientBackOff time.Duration
	// Clock stamps the lifecycle transitions. Default: the real clock.
	Clock clock.PassiveClock
	// Jitter returns d plus up to maxFactor*d, for the jitter of resyncs
	// and retries. Default wait.Jitter (math/rand); a simulation passes a
	// seeded one to be reproducible.
	Jitter func(d time.Duration, maxFactor float64) time.Duration
	// Log receives the workers' logs. Default: logr.Discard().
	Log logr.Logger
	// Registerer, if set, receives the kubelet's pod worker metrics:
	// kubelet_pod_worker_duration_seconds{operation_type} and
	// kubelet_restarted_pods_total{static}. nil: no metrics.
	Registerer prometheus.Registerer
	// OnTerminated, if set, is called (in the pod's worker, without locks)
	// as soon as a pod's containers are known stopped, before
	// SyncTerminatedPod: the status manager then sends a terminal phase it
	// held back at once rather than at its next reconcile.
	OnTerminated func(uid types.UID)
}

// PodWorkers runs a worker per pod UID, on a goroutine while the pod has
// work, and drives each pod through syncing, terminating and terminated
// (see the package doc). Create it with
// New, start it with Run; all methods are safe for concurrent use.
type PodWorkers struct {
	syncer           PodSyncer
	cache            runtime.Cache
	queue            ResyncQueue
	resync           time.Duration
	backOff          time.Duration
	transientBackOff time.Duration
	jitter           func(time.Duration, float64) time.Duration
	clock            clock.PassiveClock
	log              logr.Logger
	metrics          *workerMetrics // nil: none
	onTerminated     func(types.UID)

	wg sync.WaitGroup

	mu sync.Mutex
	// idle is signalled whenever a worker stops working on a pod; tests
	// wait on it instead of polling.
	idle *sync.Cond
	// root is the context of Run, nil before; workers derive theirs from it.
	root    context.Context
	stopped bool
	// podsSynced is true once SyncKnownPods ran: from then on a pod the
	// workers do not know is known not to run.
	podsSynced bool
	statuses   map[types.UID]*podSyncStatus
	// startedStatic holds the one started static pod per full name;
	// waitingStatic those waiting to start, in UpdatePod order.
	startedStatic map[string]types.UID
	waitingStatic map[string][]types.UID
	// ready holds the pods whose worker was started (running) but that no
	// goroutine took yet, in order; see claim.
	ready     []readyPod
	readyHead int
	// starting counts the goroutines started that did not take a pod yet.
	starting int

	// beforeStart, set by tests only, runs in the worker goroutine before it
	// takes its pending update, so a test can hold a worker.
	beforeStart func(types.UID)
}

// New checks c, fills its defaults and returns idle PodWorkers.
func New(c Config) (*PodWorkers, error) {
	if c.Syncer == nil {
		return nil, fmt.Errorf("%w: Syncer is required", ErrInvalidConfig)
	}
	if c.Cache == nil {
		return nil, fmt.Errorf("%w: Cache is required", ErrInvalidConfig)
	}
	if c.ResyncInterval < 0 || c.BackOff < 0 || c.TransientBackOff < 0 {
		return nil, fmt.Errorf("%w: negative interval", ErrInvalidConfig)
	}
	if c.Jitter == nil {
		c.Jitter = wait.Jitter
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.ResyncQueue == nil {
		c.ResyncQueue = NewQueue(c.Clock)
	}
	if c.ResyncInterval == 0 {
		c.ResyncInterval = time.Minute
	}
	if c.BackOff == 0 {
		c.BackOff = 10 * time.Second
	}
	if c.TransientBackOff == 0 {
		c.TransientBackOff = time.Second
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	p := &PodWorkers{
		syncer:           c.Syncer,
		cache:            c.Cache,
		queue:            c.ResyncQueue,
		resync:           c.ResyncInterval,
		backOff:          c.BackOff,
		jitter:           c.Jitter,
		onTerminated:     c.OnTerminated,
		transientBackOff: c.TransientBackOff,
		clock:            c.Clock,
		log:              c.Log,
		statuses:         make(map[types.UID]*podSyncStatus),
		startedStatic:    make(map[string]types.UID),
		waitingStatic:    make(map[string][]types.UID),
	}
	var err error
	if p.metrics, err = newWorkerMetrics(c.Registerer); err != nil {
		return nil, err
	}
	p.idle = sync.NewCond(&p.mu)
	return p, nil
}

// Run starts a worker for every pod updated so far and for every pod updated
// later, and blocks until ctx ends; then it stops every worker (cancelling
// syncs in flight) and returns once they have exited. Updates after that are
// recorded but never worked on. Run (or Start) may be called once.
func (p *PodWorkers) Run(ctx context.Context) error {
	stopped, err := p.Start(ctx)
	if err != nil {
		return err
	}
	<-stopped
	return nil
}

// Start is Run without the wait: it returns at once, and the channel it
// returns is closed once ctx has ended and every worker has exited. It
// holds no goroutine while ctx lasts (the stop runs on context.AfterFunc),
// which is one goroutine less a node for a simulator of thousands.
func (p *PodWorkers) Start(ctx context.Context) (stopped <-chan struct{}, err error) {
	p.mu.Lock()
	if p.root != nil || p.stopped {
		p.mu.Unlock()
		return nil, errors.New("podworkers: Run called more than once")
	}
	root, cancel := context.WithCancel(ctx)
	p.root = root
	start := false
	for uid, st := range p.statuses {
		if st.pendingUpdate != nil && !st.finished {
			start = p.claim(uid, st) || start
		}
	}
	p.mu.Unlock()
	if start {
		go p.worker(root)
	}
	done := make(chan struct{})
	context.AfterFunc(ctx, func() {
		defer close(done)
		p.mu.Lock()
		p.stopped = true
		// Pod contexts are not children of root (that would cost a map
		// entry per pod in root); they are cancelled here instead.
		for _, st := range p.statuses {
			st.release()
		}
		p.mu.Unlock()
		cancel()
		p.wg.Wait()
	})
	return done, nil
}

// readyPod is a pod whose worker was started; status tells a stale entry
// (the UID forgotten and created again since) from the pod's.
type readyPod struct {
	uid    types.UID
	status *podSyncStatus
}

// claim starts the worker of a pod: the pod is queued for a worker
// goroutine. It reports whether the caller must start one with
// go p.worker(p.root): one is started only if none is on its way to the
// queue already, and each goroutine that takes a pod starts the next if
// pods are left (see take). A goroutine that ends a pod's work takes the
// next queued pod instead of exiting, so that a burst of thousands of pods
// whose syncs are quick (an in-memory runtime, a simulation) runs on a few
// goroutines rather than on thousands that wait to be scheduled, each with
// its stack; pods whose syncs block still get a goroutine each. p.mu must
// be held and Run running.
func (p *PodWorkers) claim(uid types.UID, status *podSyncStatus) bool {
	status.running = true
	p.ready = append(p.ready, readyPod{uid, status})
	if p.starting > 0 {
		return false
	}
	p.starting++
	p.wg.Add(1)
	return true
}

// spawn starts the worker of uid; p.mu must be held and Run running.
func (p *PodWorkers) spawn(uid types.UID, status *podSyncStatus) {
	if p.claim(uid, status) {
		go p.worker(p.root)
	}
}

// needsWorker reports whether a pod with a pending update needs its worker
// started: it does not run already (it would take the update when its sync
// ends) and Run runs. p.mu must be held.
func (p *PodWorkers) needsWorker(status *podSyncStatus) bool {
	return !status.running && p.root != nil && !p.stopped
}

// wake starts the worker of a pod with a pending update unless it runs
// already. p.mu must be held.
func (p *PodWorkers) wake(uid types.UID, status *podSyncStatus) {
	if p.needsWorker(status) {
		p.spawn(uid, status)
	}
}

// UpdatePod hands a change of a pod to its worker, starting the worker if
// need be. Only the latest pending update of a pod is delivered. A pod moves
// to terminating when it has a deletion timestamp, a terminal phase, a kill,
// or is an orphaned runtime pod; once terminated, further updates of its UID
// are ignored until SyncKnownPods forgets it. An update that names no pod, or
// a runtime pod without SyncPodKill, is rejected with ErrInvalidUpdate.
func (p *PodWorkers) UpdatePod(options UpdatePodOptions) error {
	var isRuntimePod bool
	var uid types.UID
	var name, ns string
	switch {
	case options.Pod != nil:
		// A runtime pod only stands in for a pod without config.
		options.RunningPod = nil
		uid, ns, name = options.Pod.UID, options.Pod.Namespace, options.Pod.Name
	case options.RunningPod != nil:
		if options.UpdateType != SyncPodKill {
			return fmt.Errorf("runtime pod %s/%s (%s) with update %v, only kill is allowed: %w",
				options.RunningPod.Namespace, options.RunningPod.Name, options.RunningPod.ID, options.UpdateType, ErrInvalidUpdate)
		}
		uid, ns, name = options.RunningPod.ID, options.RunningPod.Namespace, options.RunningPod.Name
		isRuntimePod = true
	default:
		return fmt.Errorf("%w: neither Pod nor RunningPod set", ErrInvalidUpdate)
	}
	if uid == "" {
		return fmt.Errorf("%w: pod %s/%s has no UID", ErrInvalidUpdate, ns, name)
	}

	// A worker this update needs is started once p.mu is released: starting
	// a goroutine under the lock lengthened the time every other worker
	// waited for it (a round of 10,000 pods contends on it).
	var start context.Context
	p.mu.Lock()
	defer func() {
		p.mu.Unlock()
		if start != nil {
			go p.worker(start)
		}
	}()

	now := p.clock.Now()
	if p.metrics != nil && options.StartTime.IsZero() {
		options.StartTime = now
	}
	status, known := p.statuses[uid]
	if !known {
		status = &podSyncStatus{syncedAt: now, fullname: podutil.BuildFullName(name, ns)}
		// A pod first seen in a terminal phase whose containers the runtime
		// reports stopped finished terminating before (the agent restarted):
		// only SyncTerminatedPod is left to run.
		if pod := options.Pod; pod != nil && isTerminalPhase(pod) {
			if st, err := p.cache.Get(uid); err == nil && st != nil && !hasRunning(st) {
				status.terminatingAt, status.terminatedAt = now, now
				status.startedTerminating = true
			}
		}
		p.statuses[uid] = status
	}

	// pod is the spec decisions are made on: a runtime pod defers to any
	// spec already known, since it carries no spec of its own.
	pod := options.Pod
	if isRuntimePod {
		status.observedRuntime = true
		switch {
		case status.pendingUpdate != nil && status.pendingUpdate.Pod != nil:
			pod = status.pendingUpdate.Pod
		case status.activeUpdate != nil && status.activeUpdate.Pod != nil:
			pod = status.activeUpdate.Pod
		}
		if pod != nil {
			options.Pod, options.RunningPod = pod, nil
		}
	}

	// A create of a UID that is terminating means the source reused the UID
	// (a static pod with a fixed UID): remember it so SyncKnownPods forgets
	// the old instance once terminated and the new one can start.
	if known && status.IsTerminationRequested() && options.UpdateType == SyncPodCreate {
		status.restartRequested = true
		p.log.V(4).Info("Pod is terminating but was created again with the same UID, will restart once forgotten", "pod", klogRef(ns, name), "podUID", uid)
		closeCompleted(options.KillPodOptions)
		return nil
	}

	if status.finished {
		closeCompleted(options.KillPodOptions)
		return nil
	}

	var becameTerminating bool
	if !status.IsTerminationRequested() {
		switch {
		case isRuntimePod:
			status.deleted = true
			status.terminatingAt = now
			becameTerminating = true
		case pod.DeletionTimestamp != nil:
			status.deleted = true
			status.terminatingAt = now
			becameTerminating = true
		case isTerminalPhase(pod):
			status.terminatingAt = now
			becameTerminating = true
		case options.UpdateType == SyncPodKill:
			if options.KillPodOptions != nil && options.KillPodOptions.Evict {
				status.evicted = true
			}
			status.terminatingAt = now
			becameTerminating = true
		}
	}

	var shortened bool
	switch {
	case status.IsTerminated():
		// A runtime pod kill seen by housekeeping after termination comes
		// from stale runtime data: the worker is finishing anyway.
		if isRuntimePod {
			closeCompleted(options.KillPodOptions)
			return nil
		}
		closeCompleted(options.KillPodOptions)
		options.KillPodOptions = nil
	case status.IsTerminationRequested():
		var grace int64
		grace, shortened = calculateEffectiveGracePeriod(status, pod, options.KillPodOptions)
		status.gracePeriod = grace
		kill := KillPodOptions{}
		if o := options.KillPodOptions; o != nil {
			if o.Evict {
				status.evicted = true
			}
			if o.CompletedCh != nil || o.PodStatusFunc != nil {
				status.kills = append(status.kills, *o)
			}
			kill = *o
			kill.CompletedCh = nil
		}
		kill.Evict = status.evicted
		kill.GracePeriodSecondsOverride = &grace
		options.KillPodOptions = &kill
	default:
		closeCompleted(options.KillPodOptions)
		options.KillPodOptions = nil
	}

	if !known && pod != nil && podutil.IsStaticPod(pod) {
		// static pods of one full name start in the order seen here
		p.waitingStatic[status.fullname] = append(p.waitingStatic[status.fullname], uid)
	}

	// The mirror pod carries over from a pending update that is replaced.
	if options.MirrorPod == nil && status.pendingUpdate != nil {
		options.MirrorPod = status.pendingUpdate.MirrorPod
	}
	status.pendingUpdate = &options
	status.working = true
	if p.needsWorker(status) && p.claim(uid, status) {
		start = p.root
	}

	// Stop whatever the worker is doing so it sees the termination, or the
	// shorter grace period, at once.
	if (becameTerminating || shortened) && status.cancel != nil {
		status.cancel()
	}
	return nil
}

// TerminatePodAndWait asks pod to stop (SyncPodKill with opts) and waits
// until its containers are stopped or ctx ends; bound the wait with ctx's
// deadline (the kubelet waits 1.5 times the grace period, at least 10 s).
func (p *PodWorkers) TerminatePodAndWait(ctx context.Context, pod *v1.Pod, opts KillPodOptions) error {
	done := make(chan struct{})
	opts.CompletedCh = done
	if err := p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, KillPodOptions: &opts}); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for pod %s/%s to terminate: %w", pod.Namespace, pod.Name, ctx.Err())
	}
}

// calculateEffectiveGracePeriod returns the grace period for a terminating
// pod: the deletion's, else the override, whichever is shorter, else the
// spec's, never below 1; and whether it shortened the one in force. A grace
// period never grows once set.
func calculateEffectiveGracePeriod(status *podSyncStatus, pod *v1.Pod, kill *KillPodOptions) (int64, bool) {
	grace := status.gracePeriod
	overridden := false
	if pod != nil {
		if d := pod.DeletionGracePeriodSeconds; d != nil && (grace == 0 || *d < grace) {
			grace, overridden = *d, true
		}
	}
	if kill != nil {
		if o := kill.GracePeriodSecondsOverride; o != nil && (grace == 0 || *o < grace) {
			grace, overridden = *o, true
		}
	}
	if !overridden && grace == 0 && pod != nil {
		// a runtime pod (nil) has no spec to ask and gets the minimum
		grace = runtime.EffectiveGracePeriod(pod, nil)
	}
	if grace < 1 {
		grace = 1
	}
	return grace, status.gracePeriod != 0 && status.gracePeriod != grace
}

// allowPodStart reports whether pod may start now, and whether it ever may.
// A static pod waits until no other pod of its full name is started and it
// is first in line; it is then requeued to try again. p.mu must be held.
func (p *PodWorkers) allowPodStart(pod *v1.Pod) (canStart, canEverStart bool) {
	if !podutil.IsStaticPod(pod) {
		return true, true
	}
	status, ok := p.statuses[pod.UID]
	if !ok {
		return false, false
	}
	if status.IsTerminationRequested() {
		return false, false
	}
	if !p.allowStaticPodStart(status.fullname, pod.UID) {
		p.queue.Enqueue(pod.UID, p.jitter(p.backOff, backOffJitterFactor))
		return false, true
	}
	return true, true
}

// allowStaticPodStart starts uid if no pod of fullname is started and uid is
// the first waiting pod still wanted; it drops waiting UIDs that were
// terminated or forgotten meanwhile, so they never block the line (the
// kubelet's bugs #107733 and #107900). p.mu must be held.
func (p *PodWorkers) allowStaticPodStart(fullname string, uid types.UID) bool {
	if started, ok := p.startedStatic[fullname]; ok {
		return started == uid
	}
	waiting := p.waitingStatic[fullname]
	for i, w := range waiting {
		st, ok := p.statuses[w]
		if !ok || st.IsTerminationRequested() || st.IsTerminated() {
			continue
		}
		if w != uid {
			p.waitingStatic[fullname] = waiting[i:]
			return false
		}
		waiting = waiting[i+1:]
		break
	}
	if len(waiting) == 0 {
		delete(p.waitingStatic, fullname)
	} else {
		p.waitingStatic[fullname] = waiting
	}
	p.startedStatic[fullname] = uid
	return true
}

// work is one update taken by a worker.
type work struct {
	state   State
	options UpdatePodOptions
	// lastSync is when the pod's previous sync ended.
	lastSync time.Time
}

// startPodSync takes the pending update of uid and decides whether the pod
// may run; ok is false if there was nothing to do.
func (p *PodWorkers) startPodSync(uid types.UID, claimed *podSyncStatus, w *work) (ctx context.Context, canStart, canEverStart, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()

	status, found := p.statuses[uid]
	if p.stopped {
		return nil, false, false, false
	}
	if found && status != claimed {
		// The pod was forgotten before its worker started and its UID was
		// created again: that instance has a worker of its own.
		return nil, false, false, false
	}
	if !found || status.pendingUpdate == nil {
		if found {
			p.stopWorker(status)
		}
		return nil, false, false, false
	}
	w.state = status.WorkType()
	w.options = *status.pendingUpdate
	w.lastSync = status.lastSync
	status.pendingUpdate = nil

	if status.ctx == nil || status.ctx.Err() != nil {
		if status.cancel != nil {
			status.cancel()
		}
		status.ctx, status.cancel = context.WithCancel(context.Background())
	}
	ctx = status.ctx

	if status.IsStarted() {
		status.mergeLastUpdate(w.options)
		return ctx, true, true, true
	}
	// An orphan being terminated "starts" straight into terminating.
	if w.options.RunningPod != nil && w.state == StateTerminating {
		status.mergeLastUpdate(w.options)
		return ctx, true, true, true
	}
	if w.options.Pod == nil {
		// cannot happen: UpdatePod only accepts runtime pods with kill
		status.mergeLastUpdate(w.options)
		return ctx, false, false, true
	}
	canStart, canEverStart = p.allowPodStart(w.options.Pod)
	switch {
	case !canEverStart:
		p.cleanupUnstartedPod(uid, status)
		return ctx, false, false, true
	case !canStart:
		// keep the update for the next try (the pod was requeued)
		status.pendingUpdate = &w.options
		p.stopWorker(status)
		return ctx, false, true, true
	}
	status.startedAt = p.clock.Now()
	status.mergeLastUpdate(w.options)
	return ctx, true, true, true
}

// workerLoop is the worker of one pod while it has work, on a worker
// goroutine: it takes the pod's pending updates one after another and
// returns once none is left (UpdatePod starts it again), when the pod is
// finished or forgotten, or when root ends. An idle pod holds no goroutine.
func (p *PodWorkers) workerLoop(root context.Context, uid types.UID, status *podSyncStatus, w *work) {
	for root.Err() == nil {
		if p.beforeStart != nil {
			p.beforeStart(uid)
		}
		ctx, canStart, canEverStart, ok := p.startPodSync(uid, status, w)
		if !ok || !canEverStart || !canStart {
			return
		}
		if !p.work(root, ctx, uid, w) {
			return
		}
	}
}

// worker is a worker goroutine: it takes queued pods one after another
// and runs each pod's workerLoop, until none is queued or root ends.
func (p *PodWorkers) worker(root context.Context) {
	defer p.wg.Done()
	// The worker's frames are kept small: a new goroutine's stack is 2 KB,
	// and the deepest point of a round (the syncer's) should fit in it.
	w := new(work)
	first := true
	for root.Err() == nil {
		next, spawn, ok := p.take(first)
		first = false
		if spawn {
			go p.worker(root)
		}
		if !ok {
			return
		}
		*w = work{}
		p.workerLoop(root, next.uid, next.status, w)
	}
	if first {
		p.mu.Lock()
		p.starting--
		p.mu.Unlock()
	}
}

// take dequeues the next ready pod; starting says the caller was started
// for the queue and has not taken a pod yet. spawn reports that the caller
// must start another goroutine, for the pods still queued.
func (p *PodWorkers) take(starting bool) (next readyPod, spawn, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if starting {
		p.starting--
	}
	if p.stopped || p.readyHead == len(p.ready) {
		return readyPod{}, false, false
	}
	next = p.ready[p.readyHead]
	p.ready[p.readyHead] = readyPod{}
	p.readyHead++
	switch {
	case p.readyHead == len(p.ready):
		p.ready, p.readyHead = p.ready[:0], 0
	case p.readyHead >= 64 && 2*p.readyHead >= len(p.ready):
		// A queue that never drains (pods keep arriving) would otherwise
		// keep its taken half, and append would copy it on growth.
		n := copy(p.ready, p.ready[p.readyHead:])
		clear(p.ready[n:])
		p.ready, p.readyHead = p.ready[:n], 0
	}
	if p.readyHead < len(p.ready) && p.starting == 0 {
		p.starting++
		p.wg.Add(1)
		spawn = true
	}
	return next, spawn, true
}

// work syncs one update and records the outcome; it reports whether the
// worker goes on to the pod's next pending update.
func (p *PodWorkers) work(root, ctx context.Context, uid types.UID, w *work) bool {
	var status *runtime.PodStatus
	var err error
	if w.options.RunningPod == nil {
		// never act on runtime status older than our last sync
		status, err = p.cache.GetNewerThan(ctx, uid, w.lastSync)
		if err != nil {
			err = fmt.Errorf("determining pod status: %w", err)
		}
	}
	var isTerminal bool
	lastSync := w.lastSync // unchanged unless a sync ran
	if err == nil {
		isTerminal, err = p.sync(ctx, uid, w, status)
		lastSync = p.clock.Now()
	}

	if root.Err() != nil {
		return false
	}
	if p.metrics != nil {
		p.metrics.observe(w, p.clock.Now())
	}
	var transition bool
	switch {
	case err != nil:
		p.logSyncError(err, uid, w.state)
	case w.state == StateTerminated:
		p.completeTerminated(uid)
		return false
	case w.state == StateTerminating:
		if w.options.RunningPod != nil {
			p.completeTerminatingRuntimePod(uid)
			return false
		}
		p.completeTerminating(uid)
		if p.onTerminated != nil {
			p.onTerminated(uid)
		}
		transition = true
	case isTerminal:
		p.completeSync(uid)
		transition = true
	}
	return p.completeWork(uid, lastSync, transition, err)
}

// logSyncError logs a failed sync; out of line to keep the worker's frame
// small.
//
//go:noinline
func (p *PodWorkers) logSyncError(err error, uid types.UID, state State) {
	switch {
	case errors.Is(err, context.Canceled):
		p.log.V(2).Info("Pod sync cancelled", "podUID", uid, "state", state)
	case errors.Is(err, runtime.ErrCrashLoopBackOff) || errors.Is(err, runtime.ErrImagePullBackOff):
		// A container waiting out its back-off is no sync failure: the
		// kubelet does not log it (the runtime's BackOff event says it).
		p.log.V(4).Info("Pod sync waits for a back-off", "podUID", uid, "state", state, "reason", err)
	default:
		p.log.Error(err, "Error syncing pod, will retry", "podUID", uid, "state", state)
	}
}

// sync calls the syncer method for w's state, turning a panic into an error.
func (p *PodWorkers) sync(ctx context.Context, uid types.UID, w *work, status *runtime.PodStatus) (isTerminal bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			isTerminal, err = false, p.syncPanicked(r, uid, w.state)
		}
	}()
	switch w.state {
	case StateTerminated:
		return false, p.syncer.SyncTerminatedPod(ctx, w.options.Pod, status)
	case StateTerminating:
		var grace *int64
		if k := w.options.KillPodOptions; k != nil {
			grace = k.GracePeriodSecondsOverride
		}
		statusFn := p.acknowledgeTerminating(uid)
		if w.options.RunningPod != nil {
			return false, p.syncer.SyncTerminatingRuntimePod(ctx, w.options.RunningPod)
		}
		if grace == nil {
			g := runtime.EffectiveGracePeriod(w.options.Pod, nil)
			grace = &g
		}
		return false, p.syncer.SyncTerminatingPod(ctx, w.options.Pod, status, grace, statusFn)
	default:
		return p.syncer.SyncPod(ctx, w.options.UpdateType, w.options.Pod, w.options.MirrorPod, status)
	}
}

// syncPanicked logs a syncer's panic and returns it as an error; out of
// line, since the deferred function that calls it runs at the worker's
// deepest point.
//
//go:noinline
func (p *PodWorkers) syncPanicked(r any, uid types.UID, state State) error {
	p.log.Error(fmt.Errorf("%v", r), "Pod syncer panicked", "podUID", uid, "state", state)
	return fmt.Errorf("%w: %v", ErrSyncerPanic, r)
}

// acknowledgeTerminating records that the worker saw the termination (no
// container will start any more) and returns the latest kill's status
// function.
func (p *PodWorkers) acknowledgeTerminating(uid types.UID) func(*v1.PodStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	status, ok := p.statuses[uid]
	if !ok {
		return nil
	}
	if !status.terminatingAt.IsZero() {
		status.startedTerminating = true
	}
	for i := len(status.kills) - 1; i >= 0; i-- {
		if fn := status.kills[i].PodStatusFunc; fn != nil {
			return fn
		}
	}
	return nil
}

// completeSync moves a pod that reached a terminal phase to terminating.
func (p *PodWorkers) completeSync(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	status, ok := p.statuses[uid]
	if !ok {
		return
	}
	if status.terminatingAt.IsZero() {
		status.terminatingAt = p.clock.Now()
	}
	status.startedTerminating = true
	p.requeueLastPodUpdate(uid, status)
}

// completeTerminating moves a pod whose containers stopped to terminated.
func (p *PodWorkers) completeTerminating(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	status, ok := p.statuses[uid]
	if !ok {
		return
	}
	status.terminatedAt = p.clock.Now()
	status.closeKills()
	p.requeueLastPodUpdate(uid, status)
}

// completeTerminatingRuntimePod forgets an orphan once stopped: it has no
// config, so there is nothing more to do or to remember.
func (p *PodWorkers) completeTerminatingRuntimePod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	status, ok := p.statuses[uid]
	if !ok {
		return
	}
	status.terminatedAt = p.clock.Now()
	status.finished = true
	status.closeKills()
	p.releaseStatic(uid, status)
	status.release()
	delete(p.statuses, uid)
	p.idle.Broadcast()
}

// completeTerminated finishes a pod; its worker exits and its history stays
// until SyncKnownPods forgets it.
func (p *PodWorkers) completeTerminated(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	status, ok := p.statuses[uid]
	if !ok {
		return
	}
	status.finished = true
	status.closeKills()
	status.release()
	p.releaseStatic(uid, status)
	p.stopWorker(status)
}

// cleanupUnstartedPod finishes a pod that was stopped before it ever
// started. p.mu must be held.
func (p *PodWorkers) cleanupUnstartedPod(uid types.UID, status *podSyncStatus) {
	status.finished = true
	status.terminatedAt = p.clock.Now()
	status.closeKills()
	status.release()
	p.releaseStatic(uid, status)
	p.stopWorker(status)
}

// retryDelay is how long after a sync that failed with err the pod is
// due again.
func (p *PodWorkers) retryDelay(err error) time.Duration {
	if d, ok := RetryDelay(err); ok {
		// Capped so that a wait longer than the resync interval still
		// gets the pod its periodic sync; that sync says the rest.
		return min(d, p.resync)
	}
	if errors.Is(err, ErrTransient) {
		return p.jitter(p.transientBackOff, backOffJitterFactor)
	}
	return p.jitter(p.backOff, backOffJitterFactor)
}

// completeWork queues the pod's next sync and reports whether another
// update is pending for the worker; if none is, the worker stops.
func (p *PodWorkers) completeWork(uid types.UID, lastSync time.Time, transition bool, err error) bool {
	switch {
	case transition:
		p.queue.Enqueue(uid, 0)
	case err == nil:
		p.queue.Enqueue(uid, p.jitter(p.resync, resyncJitterFactor))
	default:
		p.queue.Enqueue(uid, p.retryDelay(err))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	status, ok := p.statuses[uid]
	if !ok {
		return false
	}
	status.lastSync = lastSync
	if status.pendingUpdate != nil {
		return true
	}
	p.stopWorker(status)
	return false
}

// requeueLastPodUpdate replays the last update if none is pending, so the
// worker moves on to the next state without waiting for the caller. p.mu
// must be held.
func (p *PodWorkers) requeueLastPodUpdate(uid types.UID, status *podSyncStatus) {
	if status.pendingUpdate != nil || status.activeUpdate == nil {
		return
	}
	copied := *status.activeUpdate
	if p.metrics != nil {
		copied.StartTime = p.clock.Now() // the next step is due from now
	}
	status.pendingUpdate = &copied
	status.working = true
	p.wake(uid, status)
}

// releaseStatic frees the full name a started static pod held. p.mu must be
// held.
func (p *PodWorkers) releaseStatic(uid types.UID, status *podSyncStatus) {
	if p.startedStatic[status.fullname] == uid {
		delete(p.startedStatic, status.fullname)
	}
}

// stopWorker records that the pod's worker exits: the pod is not worked on
// and has no goroutine. p.mu must be held.
func (p *PodWorkers) stopWorker(status *podSyncStatus) {
	status.running, status.working = false, false
	p.idle.Broadcast()
}

// SyncKnownPods reconciles the workers with desiredPods, the pods the
// sources want. A pod not desired (an orphan: force-deleted, or removed from
// a source without a kill) is driven to termination by its worker; once
// finished it is forgotten, as is a terminated pod whose UID was created
// again. It returns the state of every pod still tracked; the caller re-adds
// desired pods missing from it with a SyncPodCreate update. After the first
// call, a UID the workers do not know counts as not running.
func (p *PodWorkers) SyncKnownPods(desiredPods []*v1.Pod) map[types.UID]KnownPod {
	desired := make(map[types.UID]struct{}, len(desiredPods))
	for _, pod := range desiredPods {
		desired[pod.UID] = struct{}{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.podsSynced = true
	known := make(map[types.UID]KnownPod, len(p.statuses))
	for uid, status := range p.statuses {
		_, ok := desired[uid]
		orphan := !ok
		if (status.restartRequested || orphan) && p.removeTerminatedWorker(uid, status, orphan) {
			if status.restartRequested && p.metrics != nil {
				p.metrics.restart(status.static())
			}
			continue
		}
		k := KnownPod{State: status.WorkType(), Orphan: orphan}
		var pod *v1.Pod
		switch {
		case status.activeUpdate != nil:
			pod = status.activeUpdate.Pod
		case status.pendingUpdate != nil:
			pod = status.pendingUpdate.Pod
		}
		if pod != nil {
			k.HasConfig = true
			k.Static = podutil.IsStaticPod(pod)
		}
		known[uid] = k
	}
	return known
}

// removeTerminatedWorker forgets a finished pod and reports true. A pod not
// yet finished is kept; if orphaned, it is driven to termination here, since
// no source will send it another update (the kubelet's bug #113145: a
// force-deleted pod stayed terminating). p.mu must be held.
func (p *PodWorkers) removeTerminatedWorker(uid types.UID, status *podSyncStatus, orphan bool) bool {
	if !status.finished {
		if !orphan {
			return false
		}
		status.deleted = true
		switch {
		case !status.IsStarted() && !status.observedRuntime:
			// never started: nothing runs, forget it now
		case !status.IsTerminationRequested():
			status.terminatingAt = p.clock.Now()
			if status.activeUpdate != nil && status.activeUpdate.Pod != nil {
				status.gracePeriod, _ = calculateEffectiveGracePeriod(status, status.activeUpdate.Pod, nil)
			} else {
				status.gracePeriod = 1
			}
			p.requeueLastPodUpdate(uid, status)
			if status.cancel != nil {
				status.cancel()
			}
			return false
		default:
			p.requeueLastPodUpdate(uid, status)
			return false
		}
	}
	status.closeKills()
	status.release()
	delete(p.statuses, uid)
	p.releaseStatic(uid, status)
	p.idle.Broadcast()
	return true
}

// isTerminalPhase reports whether pod reached Succeeded or Failed.
func isTerminalPhase(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// hasRunning reports whether the runtime status shows a running container
// or a ready sandbox.
func hasRunning(st *runtime.PodStatus) bool {
	for _, c := range st.ContainerStatuses {
		if c.State == runtime.ContainerStateRunning {
			return true
		}
	}
	for _, s := range st.SandboxStatuses {
		if s.State == runtime.SandboxStateReady {
			return true
		}
	}
	return false
}

// closeCompleted closes the completion channel of a kill that has nothing
// left to wait for.
func closeCompleted(k *KillPodOptions) {
	if k != nil && k.CompletedCh != nil {
		close(k.CompletedCh)
	}
}

// klogRef formats a pod reference for logs.
func klogRef(ns, name string) string {
	return ns + "/" + name
}
