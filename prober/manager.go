package prober

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// ErrInvalidConfig is wrapped by New's errors.
var ErrInvalidConfig = errors.New("prober: invalid config")

// DefaultUserAgent is the User-Agent of HTTP and gRPC probes, the kubelet's
// "kube-probe/<major>.<minor>" for the Kubernetes API nodekit builds on.
const DefaultUserAgent = "kube-probe/1.37"

// StatusProvider gives the latest API status of a pod, which the workers
// read for container IDs, states, Started and the pod IP. The status
// manager's SharedPodStatus fits; the status is read, never modified.
type StatusProvider interface {
	SharedPodStatus(uid types.UID) (*v1.PodStatus, bool)
}

// EventRecorder records events; client-go's record.EventRecorder fits.
type EventRecorder interface {
	Eventf(object k8sruntime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Config configures a Manager. Status is required.
type Config struct {
	// Status gives the pods' statuses. Required.
	Status StatusProvider
	// Runner runs exec probes, normally the runtime if it implements
	// runtime.CommandRunner. nil: exec probes error with a clear message.
	Runner runtime.CommandRunner
	// Recorder receives Unhealthy and ProbeWarning events. Optional.
	Recorder EventRecorder
	// MaxConcurrent bounds the probes running at once; a probe due while
	// all slots are taken waits for one. Default 256.
	MaxConcurrent int
	// Transport carries HTTP probes. Default: the kubelet's probe transport
	// (no keep-alives, no proxy, no compression, TLS unverified), dialing
	// with Dial.
	Transport http.RoundTripper
	// Dial opens the connections of network probes (httpGet through the
	// default Transport, tcpSocket, grpc). Default: the host's network,
	// with the kubelet's probe dialer. A runtime whose pods are not on the
	// host's network (runtime/fake's, in memory) gives its own: see
	// runtime.PodDialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// UserAgent is sent by HTTP probes without their own User-Agent header
	// and by gRPC probes. Default DefaultUserAgent.
	UserAgent string
	// Clock drives periods and initial delays. Default the real clock.
	Clock clock.WithTicker
	// Jitter returns how long a worker created within one period of Run's
	// start waits before its first probe, so that probes of pods found at
	// start-up spread out, as the kubelet's. Default: uniform in [0, period).
	Jitter func(period time.Duration) time.Duration
	// Log receives the prober's logs. Default logr.Discard().
	Log logr.Logger
	// Registerer, if set, receives the kubelet's prober metrics
	// (prober_probe_total, prober_probe_duration_seconds), which the
	// kubelet serves on /metrics/probes. nil: no metrics.
	Registerer prometheus.Registerer
	// OnUpdate, if set, is called with every change of a probe result in
	// the results' pump (one goroutine at a time, running while changes
	// are pending), in place of the Updates stream (which then stays
	// silent): a consumer that would only read the stream saves a
	// goroutine of its own. Changes coalesce while it runs, as while a
	// reader of the stream is away.
	OnUpdate func(ctx context.Context, u Update)
}

// Manager runs the probes of the pods it is given, one worker per container
// and probe type, and keeps their results. Create it with New, run it with
// Run. All methods are safe for concurrent use.
type Manager struct {
	status    StatusProvider
	runner    runtime.CommandRunner
	recorder  EventRecorder
	transport func() http.RoundTripper
	dial      func(ctx context.Context, network, address string) (net.Conn, error) // nil: the host's
	userAgent string
	clock     clock.WithTicker
	jitter    func(time.Duration) time.Duration
	log       logr.Logger

	metrics *metrics
	results *results
	updates chan Update
	// onUpdate replaces updates if set (Config.OnUpdate).
	onUpdate func(ctx context.Context, u Update)
	sem      chan struct{}

	mu      sync.Mutex
	workers map[workerKey]*worker
	// ctx is Run's context while Run runs; nil before, done after.
	ctx     context.Context
	started time.Time
	wg      sync.WaitGroup
	ran     bool

	// pumpMu guards the pump's start and end (kick, pump).
	pumpMu  sync.Mutex
	pumpCtx context.Context // Start's; nil before
	pumping bool
}

type workerKey struct {
	uid       types.UID
	container string
	typ       ProbeType
}

// New checks c and fills its defaults.
func New(c Config) (*Manager, error) {
	if c.Status == nil {
		return nil, fmt.Errorf("%w: Status is required", ErrInvalidConfig)
	}
	if c.MaxConcurrent < 0 {
		return nil, fmt.Errorf("%w: negative MaxConcurrent", ErrInvalidConfig)
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = 256
	}
	transport := func() http.RoundTripper { return c.Transport }
	if c.Transport == nil {
		dial := c.Dial
		if dial == nil {
			dial = probeDialer(0).DialContext
		}
		// Built at the first HTTP probe: most pods have none, and an
		// http.Transport is ~1 KiB on each of a simulator's thousand
		// agents.
		transport = sync.OnceValue(func() http.RoundTripper { return newTransport(dial) })
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Jitter == nil {
		c.Jitter = func(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d))) }
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	met, err := newMetrics(c.Registerer)
	if err != nil {
		return nil, err
	}
	res := newResults()
	m := &Manager{
		metrics:   met,
		status:    c.Status,
		runner:    c.Runner,
		recorder:  c.Recorder,
		transport: transport,
		dial:      c.Dial,
		userAgent: c.UserAgent,
		clock:     c.Clock,
		jitter:    c.Jitter,
		log:       c.Log,
		results:   res,
		updates:   make(chan Update),
		onUpdate:  c.OnUpdate,
		sem:       make(chan struct{}, c.MaxConcurrent),
		workers:   map[workerKey]*worker{},
	}
	res.onQueued = m.kick
	return m, nil
}

// Run runs the workers until ctx ends and returns once they all have
// stopped. Workers of pods added before Run start with it. Call it (or
// Start) once.
func (m *Manager) Run(ctx context.Context) error {
	stopped, err := m.Start(ctx)
	if err != nil {
		return err
	}
	<-stopped
	return nil
}

// Start is Run without the wait: it starts the workers and returns at
// once; stopped is closed once ctx has ended and every goroutine of the
// Manager has ended with it. No goroutine waits for ctx meanwhile, and
// the results are delivered by a goroutine that runs only while changes
// are pending (an agent without probes has none), as the pod workers'
// Start.
func (m *Manager) Start(ctx context.Context) (stopped <-chan struct{}, err error) {
	m.mu.Lock()
	if m.ran {
		m.mu.Unlock()
		return nil, errors.New("prober: Run called twice")
	}
	m.ran = true
	m.ctx = ctx
	m.started = m.clock.Now()
	for _, w := range m.workers {
		m.startLocked(w)
	}
	m.mu.Unlock()
	m.pumpMu.Lock()
	m.pumpCtx = ctx
	m.pumpMu.Unlock()
	m.kick() // changes made before Start
	done := make(chan struct{})
	context.AfterFunc(ctx, func() {
		// AddPod and kick start no goroutine once ctx has ended: taking
		// their locks orders their wg.Add before the Wait.
		m.mu.Lock()
		m.mu.Unlock()
		m.pumpMu.Lock()
		m.pumpMu.Unlock()
		m.wg.Wait()
		close(done)
	})
	return done, nil
}

// kick starts the pump unless it runs, Start has not run or ctx has
// ended; the results call it after queueing a change.
func (m *Manager) kick() {
	m.pumpMu.Lock()
	defer m.pumpMu.Unlock()
	if m.pumping || m.pumpCtx == nil || m.pumpCtx.Err() != nil || m.results.empty() {
		return
	}
	m.pumping = true
	m.wg.Add(1)
	go m.pump(m.pumpCtx)
}

// pump delivers the results' changes (to OnUpdate or the updates stream)
// until none is pending, then ends; kick starts it again.
func (m *Manager) pump(ctx context.Context) {
	defer m.wg.Done()
	var buf []Update
	for {
		buf = m.results.take(buf)
		if len(buf) == 0 {
			// A change queued after the check finds pumping false and
			// starts another pump; one queued before is taken here.
			m.pumpMu.Lock()
			if m.results.empty() {
				m.pumping = false
				m.pumpMu.Unlock()
				return
			}
			m.pumpMu.Unlock()
			continue
		}
		for _, u := range buf {
			if m.onUpdate != nil {
				if ctx.Err() != nil {
					return
				}
				m.onUpdate(ctx, u)
				continue
			}
			select {
			case m.updates <- u:
			case <-ctx.Done():
				return
			}
		}
	}
}

// Updates streams every change of a probe result: readiness and startup
// verdicts, liveness failures. Results change without waiting for the
// reader; while it is away they coalesce, the latest per container and
// probe type winning. The stream ends with Run, it is never closed.
func (m *Manager) Updates() <-chan Update { return m.updates }

// AddPod starts workers for the probes of pod's containers and restartable
// init containers (sidecars) that have none yet. Calling it again for the
// same pod does nothing more; a probe changed in place is not picked up
// (the API does not allow it).
func (m *Manager) AddPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx != nil && m.ctx.Err() != nil {
		return
	}
	add := func(c *v1.Container, init bool) {
		for t, p := range [numProbeTypes]*v1.Probe{Liveness: c.LivenessProbe, Readiness: c.ReadinessProbe, Startup: c.StartupProbe} {
			if p == nil {
				continue
			}
			k := workerKey{pod.UID, c.Name, ProbeType(t)}
			if _, ok := m.workers[k]; ok {
				continue
			}
			w := newWorker(m, pod, c, init, ProbeType(t), p)
			m.workers[k] = w
			if m.ctx != nil {
				m.startLocked(w)
			}
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i], false)
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; podutil.IsRestartableInitContainer(c) {
			add(c, true)
		}
	}
}

func (m *Manager) startLocked(w *worker) {
	ctx, cancel := context.WithCancel(m.ctx)
	w.cancel = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		w.runLoop(ctx)
	}()
}

// StopLivenessAndStartup stops the liveness and startup workers of pod's
// regular containers, as the kubelet does when a pod starts terminating:
// its containers are not restarted any more, readiness keeps being probed.
func (m *Manager) StopLivenessAndStartup(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range pod.Spec.Containers {
		for _, t := range [...]ProbeType{Liveness, Startup} {
			if w, ok := m.workers[workerKey{pod.UID, pod.Spec.Containers[i].Name, t}]; ok {
				w.stop()
			}
		}
	}
}

// RemovePod stops every worker of the pod.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if k.uid == uid {
			w.stop()
		}
	}
}

// CleanupPods stops the workers of every pod not in keep.
func (m *Manager) CleanupPods(keep map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if !keep[k.uid] {
			w.stop()
		}
	}
}

// Workers returns how many workers exist (running or waiting for Run).
func (m *Manager) Workers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.workers)
}

// removeWorker forgets w once it has stopped.
func (m *Manager) removeWorker(w *worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := workerKey{w.pod.UID, w.container.Name, w.typ}
	if m.workers[k] == w {
		delete(m.workers, k)
	}
}

// Result returns the current result of a probe type for a container
// instance, and false if there is none.
func (m *Manager) Result(t ProbeType, id runtime.ContainerID) (Result, bool) {
	return m.results.get(t, id)
}

// Started reports whether the container instance (its API ContainerID,
// "type://id") has passed its startup probe. It is what the status
// generation asks for containers with a startup probe; the instance's ID
// alone decides, podUID and name are the status generation's signature.
func (m *Manager) Started(podUID types.UID, name, containerID string) bool {
	id, err := runtime.ParseContainerID(containerID)
	if err != nil {
		return false
	}
	r, _ := m.results.get(Startup, id)
	return r == Success
}

// Ready reports whether the container instance has passed its readiness
// probe. Without a result yet, the container's readiness worker is asked to
// probe now rather than at its next period, as the kubelet does; so is a
// worker whose last verdict was a failure. A caller that is about to store
// the status it is generating asks with Result and TriggerReadiness once
// it has stored it instead (see TriggerReadiness).
func (m *Manager) Ready(podUID types.UID, name, containerID string) bool {
	id, err := runtime.ParseContainerID(containerID)
	if err != nil {
		return false
	}
	r, _ := m.results.get(Readiness, id)
	if r != Success {
		m.TriggerReadiness(podUID, name)
	}
	return r == Success
}

// TriggerReadiness asks the readiness worker of the pod's container, if
// any, to probe now rather than at its next period; it never blocks. The
// worker reads the container (running, its ID) and the pod IP from the
// status provider: asked before a new status is stored there, it may find
// the container not running yet and wait a whole period, or not, as
// goroutines happen to run; asked after, it probes.
func (m *Manager) TriggerReadiness(podUID types.UID, name string) {
	m.mu.Lock()
	w := m.workers[workerKey{podUID, name, Readiness}]
	m.mu.Unlock()
	if w != nil {
		w.trigger()
	}
}
