package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/internal/runtimestate"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/apiserver"
	"github.com/nodekit/nodekit/podconfig/file"
	"github.com/nodekit/nodekit/podconfig/manifesturl"
	"github.com/nodekit/nodekit/podmanager"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/prober"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/syncloop"
)

// Agent is a node agent assembled from nodekit's packages. Create it with
// New, run it with Run (once).
type Agent struct {
	cfg     Config
	log     logr.Logger
	cache   runtime.Cache
	pods    *podmanager.Manager
	status  *status.Manager
	reasons *status.ReasonCache
	backoff *runtime.Backoff
	queue   *podworkers.Queue
	workers *podworkers.PodWorkers
	pleg    *pleg.GenericPLEG
	// evented streams the events of a runtime that owns its pods' status
	// (owner); nil otherwise.
	evented *pleg.EventedPLEG
	owner   bool
	node    *node.Controller // nil without Config.Node
	loop    *syncloop.Loop
	// loopRef publishes loop, set in Run, to health checks on other
	// goroutines.
	loopRef atomic.Pointer[syncloop.Loop]
	prober  *prober.Manager
	// probeNow holds, per pod, the containers whose readiness workers a
	// generated status asks to probe now; storeStatus asks them once the
	// status is stored (see storedProbes). Guarded by probeMu.
	probeMu  sync.Mutex
	probeNow map[types.UID][]string
	// extra holds the sources of Config.Sources, by name; the map is
	// fixed after New, its entries are guarded by srcMu.
	extra map[string]*extraSource
	srcMu sync.Mutex
	// forward starts a source's forwarder of Channel's updates; set while
	// Run runs (nil before and after), guarded by srcMu.
	forward func(name string, in chan podconfig.PodUpdate)
	// senders merge the extra sources' updates (Send); written before
	// sendReady is closed, read only after.
	senders   map[string]func(context.Context, podconfig.PodUpdate) error
	sendReady chan struct{}
	secrets   *objects.Cache // nil without Config.Secrets
	// imageGC is the image garbage collector when the runtime manages
	// images; nil otherwise.
	imageGC *imageGC
	// eviction is the eviction manager of Config.Eviction, or nil.
	eviction *eviction.Manager
	// usageOnly: the admit handlers are the agent's own that read the
	// other pods only through OtherPodsUsage (IgnoreCapacity, no
	// eviction), so admission lists them only when a handler reads it.
	// (A lazy PodAdmitAttributes.OtherPods would do it for any handlers,
	// but users' handlers read that field as a slice.)
	usageOnly bool
	// sourcesReady reports whether every source has sent its pods; set in
	// Run, read by the eviction manager's container GC.
	sourcesReady atomic.Pointer[func() bool]
	// life is Run's inner context, set in Run: the runtime's SyncPod ends
	// with it rather than with the pod's sync (see runtimeContext).
	life    atomic.Pointer[context.Context]
	metrics *agentMetrics // nil: none

	// runtimeErr holds why the last runtime check failed, or a nil error.
	runtimeErr atomic.Pointer[error]
	// networkErr holds why the runtime's network is not ready, or a nil
	// error: it holds back the start of pods on the pod network only.
	networkErr atomic.Pointer[error]
	// runtime is the runtime's health as checkRuntime last heard it.
	runtime runtimestate.State
	started atomic.Bool
	// runOnce is set by RunOnce, before it syncs: no PLEG runs then.
	runOnce bool
}

var (
	_ syncloop.Handler     = (*handler)(nil)
	_ podworkers.PodSyncer = (*syncer)(nil)
)

// handler and syncer keep the agent's Handler and PodSyncer methods off its
// public surface.
type (
	handler Agent
	syncer  Agent
)

// New checks c, fills its defaults and builds the agent's parts. Nothing
// runs until Run.
func New(c Config) (*Agent, error) {
	defaultAdmission := c.AdmitHandlers == nil
	if err := c.setDefaults(); err != nil {
		return nil, err
	}
	a := &Agent{
		runtime:   runtimestate.State{DownAfter: c.RuntimeDownAfter},
		cfg:       c,
		log:       c.Log,
		pods:      podmanager.New(),
		reasons:   status.NewReasonCache(),
		backoff:   runtime.NewBackoff(c.CrashLoopBackOffInitial, c.CrashLoopBackOffMax, 0, c.Clock),
		queue:     podworkers.NewQueue(c.Clock),
		extra:     map[string]*extraSource{},
		sendReady: make(chan struct{}),
		secrets:   newSecretCache(&c),
	}
	a.cache = runtime.NewCacheWithOnWait(a.relistForWaiter)
	for _, s := range c.Sources {
		if _, dup := a.extra[s]; dup || s == "" {
			return nil, fmt.Errorf("%w: source %q empty or repeated", ErrInvalidConfig, s)
		}
		a.extra[s] = &extraSource{}
	}
	if ir, ok := c.Runtime.(imageRuntime); ok {
		a.imageGC = newImageGC(ir, c)
	}
	var err error
	if c.Eviction != nil {
		if a.eviction, err = a.newEviction(); err != nil {
			return nil, err
		}
	}
	nodes := c.Nodes
	if c.Node != nil {
		if a.node, err = a.newNode(); err != nil {
			return nil, err
		}
		nodes = a.node // the registered Node, without a request
		if defaultAdmission {
			// The Node's pods capacity (MaxPods) is the Node's checks'
			// to enforce: they preempt for a critical pod.
			a.cfg.AdmitHandlers = append(defaultAdmitHandlers(a.cfg, false), a.nodeAdmitHandler(a.node))
		}
	}
	if a.eviction != nil {
		// First, as the kubelet's: pressure refuses before any other check.
		a.cfg.AdmitHandlers = append([]admission.PodAdmitHandler{a.eviction}, a.cfg.AdmitHandlers...)
	}
	// Without MaxPods, the resources check and eviction, the default
	// handlers look at other pods only for host ports, through the Usage.
	a.usageOnly = defaultAdmission && c.IgnoreCapacity && a.eviction == nil
	a.status, err = status.NewManager(status.Config{
		PodClient:         c.StatusClient,
		NodeName:          c.NodeName,
		SyncWorkers:       c.StatusSyncWorkers,
		UpdateKnownStatus: c.UpdateKnownStatus,
		Nodes:             nodes,
		DeletionSafety:    (*handler)(a),
		Clock:             c.Clock,
		Log:               c.Log.WithName("status"),
	})
	if err != nil {
		return nil, fmt.Errorf("status manager: %w", err)
	}
	if a.prober, err = a.newProber(); err != nil {
		return nil, fmt.Errorf("prober: %w", err)
	}
	var workerCache runtime.Cache = a.cache
	if ownsStatus(c.Runtime) {
		workerCache = ownerCache{a.cache, a}
	}
	a.workers, err = podworkers.New(podworkers.Config{
		Syncer:         (*syncer)(a),
		Cache:          workerCache,
		ResyncQueue:    a.queue,
		ResyncInterval: c.SyncFrequency,
		BackOff:        c.SyncErrorBackOff,
		Jitter:         c.Jitter,
		OnTerminated:   func(uid types.UID) { a.status.Resend(uid) },
		Clock:          c.Clock,
		Log:            c.Log.WithName("podworkers"),
		Registerer:     c.Registerer,
	})
	if err != nil {
		return nil, fmt.Errorf("pod workers: %w", err)
	}
	a.pleg, err = pleg.New(pleg.Config{
		Runtime:              c.Runtime,
		Cache:                a.cache,
		RelistPeriod:         c.RelistPeriod,
		EventChannelCapacity: c.PLEGEventCapacity,
		Clock:                c.Clock,
		Log:                  c.Log.WithName("pleg"),
		Registerer:           c.Registerer,
	})
	if err != nil {
		return nil, fmt.Errorf("pleg: %w", err)
	}
	if err := a.setupStatusOwner(); err != nil {
		return nil, fmt.Errorf("pleg: %w", err)
	}
	if err := a.setupEvented(); err != nil {
		return nil, fmt.Errorf("evented pleg: %w", err)
	}
	if a.metrics, err = newAgentMetrics(c.Registerer, c.NodeName); err != nil {
		return nil, err
	}
	if a.metrics != nil && a.node != nil {
		if a.metrics.node, err = newNodeStartupMetrics(c.Registerer); err != nil {
			return nil, err
		}
	}
	a.setRuntimeErr(errors.New("runtime status not checked yet"))
	a.networkErr.Store(new(error))
	return a, nil
}

// extraSource is one of Config.Sources: fed through Channel, whose
// updates a goroutine of Run forwards, or through Send, which merges them
// in the caller's goroutine.
type extraSource struct {
	ch        chan podconfig.PodUpdate // made by the first Channel call
	forwarded bool                     // its forwarder has started
}

// Channel returns the input of an extra source named in Config.Sources;
// send it PodUpdates (a first SET marks the source ready). It is nil for a
// name not in Config.Sources. Updates sent before Run wait for it. A
// goroutine of the agent forwards the channel's updates from the first
// Channel call of the source on (from Run's start if called before);
// Send does without it.
func (a *Agent) Channel(source string) chan<- podconfig.PodUpdate {
	e, ok := a.extra[source]
	if !ok {
		return nil
	}
	a.srcMu.Lock()
	defer a.srcMu.Unlock()
	if e.ch == nil {
		e.ch = make(chan podconfig.PodUpdate, 16)
	}
	if a.forward != nil && !e.forwarded {
		e.forwarded = true
		a.forward(source, e.ch)
	}
	return e.ch
}

// Send merges u into the pods of source, an extra source named in
// Config.Sources, in the caller's goroutine, as Channel's forwarder
// would: a caller with a goroutine of its own (a shared informer's
// dispatcher, say) saves the agent one a node. It waits for Run to start,
// returns once the update is merged (the sync loop has taken it, or its
// queue has room) and ctx's error if ctx ends first, or an error for an
// unknown source or once Run has ended. u.Source is set to source. Send
// one source's updates from one goroutine at a time for their order to
// hold; do not mix Send and Channel for one source.
func (a *Agent) Send(ctx context.Context, source string, u podconfig.PodUpdate) error {
	if _, ok := a.extra[source]; !ok {
		return fmt.Errorf("agent: source %q is not in Config.Sources", source)
	}
	select {
	case <-a.sendReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	if life := a.life.Load(); (*life).Err() != nil {
		return errors.New("agent: stopped")
	}
	u.Source = source
	return a.senders[source](ctx, u)
}

// NodeName is the node the agent runs pods for (Config.NodeName).
func (a *Agent) NodeName() string { return a.cfg.NodeName }

// Status returns the agent's status manager, for a prober or a test.
func (a *Agent) Status() *status.Manager { return a.status }

// Pods returns the pods the agent wants to run, oldest first, each a copy
// carrying the latest status the agent generated for it.
func (a *Agent) Pods() []*v1.Pod {
	pods := a.pods.Pods()
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		cp := p.DeepCopy()
		if st, ok := a.status.GetPodStatus(p.UID); ok {
			cp.Status = st
		}
		out[i] = cp
	}
	return out
}

// Run runs the agent until ctx ends. With Config.TerminateOnExit it then
// stops every pod gracefully (bounded by ShutdownTimeout) before it stops its
// parts. It returns once every goroutine it started has ended. Run may be
// called once.
func (a *Agent) Run(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("agent: Run called twice")
	}
	c := a.cfg
	began := c.Clock.Now()
	// stop ends Run early when the apiserver refuses the Node for good.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	// inner outlives ctx while pods are being terminated on exit: the
	// sources stop with ctx, everything else (the loop requeues failed
	// terminations) runs on until the pods are down.
	inner, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var wg sync.WaitGroup
	spawn := func(name string, ctx context.Context, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				a.log.Error(err, "Component stopped", "component", name)
			}
		}()
	}
	defer wg.Wait()
	// Channel starts no forwarder once Run is ending (spawn's wg.Add must
	// come before the Wait).
	defer func() {
		a.srcMu.Lock()
		a.forward = nil
		a.srcMu.Unlock()
	}()

	podCfg, err := podconfig.NewPodConfig(podconfig.Incremental, podconfig.Options{
		Log: c.Log.WithName("podconfig"), Clock: c.Clock, Recorder: c.Recorder,
	})
	if err != nil {
		return err
	}
	if err := a.startSources(ctx, inner, podCfg, spawn, false); err != nil {
		cancel()
		return err
	}
	ready := podconfig.NewSourcesReady(podCfg.SeenAllSources)
	allReady := ready.AllReady
	a.sourcesReady.Store(&allReady)
	a.life.Store(&inner)
	close(a.sendReady) // Send may merge now

	a.checkRuntime(inner)
	// The runtime check and the garbage collections share a goroutine.
	jobs := []periodic{{c.RuntimeCheckPeriod, a.checkRuntime}}
	if gc, ok := c.Runtime.(runtime.GarbageCollector); ok && c.ContainerGCPeriod > 0 {
		jobs = append(jobs, a.containerGCJob(gc, ready.AllReady))
	}
	if a.imageGC != nil && c.ImageGCPeriod > 0 {
		jobs = append(jobs, a.imageGCJob(a.imageGC))
	}
	spawn("periodic", inner, func(ctx context.Context) error { return every(ctx, c.Clock, jobs...) })
	// A first relist before anything reports: the node's first status then
	// sees a healthy PLEG rather than racing its first relist, so a
	// simulation on virtual time is reproducible.
	if !a.owner {
		_ = a.pleg.Relist(inner)
	}
	spawn("pleg", inner, a.runPLEG)
	if a.eviction != nil {
		spawn("eviction", inner, a.eviction.Run)
	}
	nodeErr := make(chan error, 1)
	if a.node != nil {
		if a.metrics != nil && a.metrics.node != nil {
			now := c.Clock.Now()
			spawn("node-startup-metrics", inner, func(ctx context.Context) error { return a.watchNodeStartup(ctx, began, now) })
		}
		spawn("node", inner, func(ctx context.Context) error {
			err := a.node.Run(ctx)
			if err != nil {
				nodeErr <- err
				stop()
			}
			return err
		})
	}
	spawn("status", inner, func(ctx context.Context) error { a.status.Run(ctx); return nil })
	// The pod workers hold no goroutine until inner ends (Start, not Run).
	workersStopped, err := a.workers.Start(inner)
	if err != nil {
		cancel()
		return err
	}
	defer func() { cancel(); <-workersStopped }() // before wg.Wait: the order does not matter
	// Nor does the prober, while no probe result is to be delivered.
	proberStopped, err := a.prober.Start(inner)
	if err != nil {
		cancel()
		return err
	}
	defer func() { cancel(); <-proberStopped }()

	a.loop, err = syncloop.New(syncloop.Config{
		Source:        podCfg,
		Pods:          a.pods,
		PLEG:          a.pleg.Watch(),
		DuePods:       (*duePods)(a),
		SourcesReady:  ready,
		RuntimeErrors: a.runtimeError,
		Clock:         c.Clock,
		Log:           c.Log.WithName("syncloop"),
	})
	if err != nil {
		cancel()
		return err
	}
	a.loopRef.Store(a.loop)
	// The sync loop runs in Run's own goroutine, which would otherwise
	// only wait for ctx (a goroutine less a node); what follows ctx's end
	// runs in an AfterFunc's, and ends the loop by cancelling inner.
	var runErr error
	ended := make(chan struct{})
	context.AfterFunc(ctx, func() {
		defer close(ended)
		select {
		case runErr = <-nodeErr: // pods are left running, as after a crash
			cancel()
			return
		default:
		}
		if c.TerminateOnExit {
			tctx, tcancel := context.WithTimeout(inner, c.ShutdownTimeout)
			a.terminateAll(tctx)
			tcancel()
		}
		cancel()
	})
	if err := a.loop.Run(inner, podCfg.Updates(), (*handler)(a)); err != nil && inner.Err() == nil {
		a.log.Error(err, "Component stopped", "component", "syncloop")
	}
	<-ended
	return runErr
}

// startSources starts the configured sources (only the static ones, file
// and manifest URL, if staticOnly); the mux's inputs live on inner, the
// sources themselves stop with ctx.
func (a *Agent) startSources(ctx, inner context.Context, podCfg *podconfig.PodConfig, spawn func(string, context.Context, func(context.Context) error), staticOnly bool) error {
	c := a.cfg
	if c.StaticPodPath != "" {
		src, err := file.New(file.Config{Path: c.StaticPodPath, NodeName: c.NodeName, CheckFrequency: c.FileCheckFrequency,
			Clock: c.Clock, Log: c.Log.WithName("file"), Recorder: c.Recorder})
		if err != nil {
			return fmt.Errorf("file source: %w", err)
		}
		ch := podCfg.Channel(inner, podutil.FileSource)
		spawn("file-source", ctx, func(ctx context.Context) error { return src.Run(ctx, ch) })
	}
	if c.ManifestURL != "" {
		src, err := manifesturl.New(manifesturl.Config{URL: c.ManifestURL, Header: c.ManifestURLHeader, NodeName: c.NodeName,
			CheckFrequency: c.HTTPCheckFrequency, Clock: c.Clock, Log: c.Log.WithName("manifesturl"), Recorder: c.Recorder})
		if err != nil {
			return fmt.Errorf("manifest URL source: %w", err)
		}
		ch := podCfg.Channel(inner, podutil.HTTPSource)
		spawn("http-source", ctx, func(ctx context.Context) error { return src.Run(ctx, ch) })
	}
	if staticOnly {
		return nil
	}
	if c.PodSource != nil {
		src, err := apiserver.New(apiserver.Config{Client: c.PodSource, NodeName: c.NodeName, Filter: c.PodFilter, Clock: c.Clock,
			Log: c.Log.WithName("apiserver-source")})
		if err != nil {
			return fmt.Errorf("apiserver source: %w", err)
		}
		ch := podCfg.Channel(inner, podutil.ApiserverSource)
		spawn("apiserver-source", ctx, func(ctx context.Context) error { return src.Run(ctx, ch) })
	}
	// Each source's updates are merged by Send in the caller's goroutine,
	// or by a forwarder of Channel's that Channel starts (now for those
	// called already): no goroutine for a source fed by Send.
	a.senders = make(map[string]func(context.Context, podconfig.PodUpdate) error, len(a.extra))
	for name := range a.extra {
		a.senders[name] = podCfg.Sender(name)
	}
	a.srcMu.Lock()
	defer a.srcMu.Unlock()
	a.forward = func(name string, in chan podconfig.PodUpdate) {
		send := a.senders[name]
		spawn("source-"+name, ctx, func(ctx context.Context) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case u := <-in:
					u.Source = name
					if send(inner, u) != nil {
						return nil
					}
				}
			}
		})
	}
	for name, e := range a.extra {
		if e.ch != nil && !e.forwarded {
			e.forwarded = true
			a.forward(name, e.ch)
		}
	}
	return nil
}

// checkRuntime records whether the runtime reports ready. As the kubelet's
// runtime state, a failed Status call leaves the last answer standing: the
// runtime counts as down only once it has not answered ready for
// RuntimeDownAfter (or before its first answer), so one slow or failed call
// does not stop every pod's sync.
func (a *Agent) checkRuntime(ctx context.Context) {
	st, serr := a.cfg.Runtime.Status(ctx)
	if serr == nil && st == nil {
		serr = errors.New("no status")
	}
	now := a.cfg.Clock.Now()
	a.runtime.Observe(st, serr, now)
	var err, netErr error
	switch {
	case serr != nil && a.runtime.Down(now): // also before a first answer
		err = fmt.Errorf("runtime status: %w", serr)
	case !conditionTrue(a.runtime.Last(), runtime.RuntimeReady):
		err = fmt.Errorf("container runtime not ready: %+v", a.runtime.Last().Conditions)
	}
	// As the kubelet's runtime state, the network apart: a runtime whose
	// network is not ready still syncs every pod, and only the pods on the
	// pod network wait to start (SyncPod).
	if last := a.runtime.Last(); last != nil && !conditionTrue(last, runtime.NetworkReady) {
		netErr = fmt.Errorf("container runtime network not ready: %+v", last.Condition(runtime.NetworkReady))
	}
	wasErr, wasNet := *a.runtimeErr.Load(), *a.networkErr.Load()
	if a.node != nil && ((wasErr == nil) != (err == nil) || (wasNet == nil) != (netErr == nil)) {
		a.node.Trigger() // readiness changed: report it now
	}
	a.setRuntimeErr(err)
	a.networkErr.Store(&netErr)
}

// conditionTrue reports whether st has condition t and it is true.
func conditionTrue(st *runtime.RuntimeStatus, t runtime.RuntimeConditionType) bool {
	c := st.Condition(t)
	return c != nil && c.Status
}

// networkError is why pods on the pod network cannot start now, or nil.
func (a *Agent) networkError() error { return *a.networkErr.Load() }

func (a *Agent) setRuntimeErr(err error) { a.runtimeErr.Store(&err) }

// runtimeError is the sync loop's RuntimeErrors: the last runtime check,
// then the PLEG's health, asked live (as the kubelet's health checks are)
// so that pods sync as soon as the first relist is done rather than at the
// next runtime check.
func (a *Agent) runtimeError() error {
	if err := *a.runtimeErr.Load(); err != nil {
		return err
	}
	if a.runOnce {
		return nil
	}
	if err := a.pleg.Healthy(); err != nil {
		return fmt.Errorf("PLEG not healthy: %w", err)
	}
	return nil
}

// terminateAll stops every pod and orphaned runtime pod, waits for them
// within ctx, removes what the runtime keeps of them and flushes statuses.
func (a *Agent) terminateAll(ctx context.Context) {
	var wg sync.WaitGroup
	known := map[string]bool{}
	for _, p := range a.pods.Pods() {
		known[string(p.UID)] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.workers.TerminatePodAndWait(ctx, p, podworkers.KillPodOptions{}); err != nil {
				a.log.Error(err, "Pod did not stop on shutdown", "pod", podutil.FullName(p))
			}
		}()
	}
	if running, err := a.cfg.Runtime.GetPods(ctx, false); err == nil {
		for _, rp := range running {
			if known[string(rp.ID)] {
				continue
			}
			done := make(chan struct{})
			if err := a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, RunningPod: rp,
				KillPodOptions: &podworkers.KillPodOptions{CompletedCh: done}}); err != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-done:
				case <-ctx.Done():
				}
			}()
		}
	}
	wg.Wait()
	if gc, ok := a.cfg.Runtime.(runtime.GarbageCollector); ok {
		if err := gc.GarbageCollect(ctx, runtime.GCPolicy{MaxPerPodContainer: 0, MaxContainers: 0}, true); err != nil {
			a.log.Error(err, "Garbage collection on shutdown failed")
		}
	}
	a.status.Sync(ctx)
}
