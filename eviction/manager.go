package eviction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/podutil"
)

// ErrInvalidConfig is wrapped by New when the Config is unusable.
var ErrInvalidConfig = errors.New("eviction: invalid config")

// Reason is the status reason of an evicted pod and of a pod refused under
// pressure, the kubelet's.
const Reason = "Evicted"

// ReasonTerminationByKubelet is the DisruptionTarget condition's reason on
// an evicted pod (v1.PodReasonTerminationByKubelet).
const ReasonTerminationByKubelet = "TerminationByKubelet"

// hardEvictionGracePeriodSeconds is the grace period of a pod evicted for a
// hard threshold: the kubelet's immediateEvictionGracePeriodSeconds.
const hardEvictionGracePeriodSeconds = 1

// The kubelet's waits after an eviction.
const (
	podCleanupTimeout  = 30 * time.Second
	podCleanupPollFreq = time.Second
)

// SummaryProvider gives the kubelet's Summary API (/stats/summary), the
// manager's only view of usage. updateStats asks for fresh stats rather
// than cached ones where the provider caches.
type SummaryProvider interface {
	Get(ctx context.Context, updateStats bool) (*statsapi.Summary, error)
}

// SummaryProviderFunc is a function that is a SummaryProvider.
type SummaryProviderFunc func(ctx context.Context, updateStats bool) (*statsapi.Summary, error)

// Get calls f.
func (f SummaryProviderFunc) Get(ctx context.Context, updateStats bool) (*statsapi.Summary, error) {
	return f(ctx, updateStats)
}

// KillOptions say how an evicted pod is stopped and what its status says.
type KillOptions struct {
	// GracePeriodSeconds overrides the pod's grace period; nil keeps it.
	GracePeriodSeconds *int64
	// Reason and Message are the status's: Evicted and the kubelet's
	// message.
	Reason, Message string
	// Condition is added to the status: DisruptionTarget, reason
	// TerminationByKubelet.
	Condition v1.PodCondition
}

// UpdateStatus sets s as the kubelet sets an evicted pod's status: phase
// Failed, o's reason and message, o's condition (replacing one of its
// type). A killer may pass it as its status function.
func (o KillOptions) UpdateStatus(s *v1.PodStatus) {
	s.Phase, s.Reason, s.Message = v1.PodFailed, o.Reason, o.Message
	if i := slices.IndexFunc(s.Conditions, func(c v1.PodCondition) bool { return c.Type == o.Condition.Type }); i >= 0 {
		s.Conditions[i] = o.Condition
	} else {
		s.Conditions = append(s.Conditions, o.Condition)
	}
}

// PodKiller stops a pod for good, the kubelet's
// TerminatePodAbnormallyAndWait: the pod ends Failed with the options'
// status, and KillPod returns once its containers stopped, or with an
// error when it gave up waiting.
type PodKiller interface {
	KillPod(ctx context.Context, pod *v1.Pod, opts KillOptions) error
}

// PodKillerFunc is a function that is a PodKiller.
type PodKillerFunc func(ctx context.Context, pod *v1.Pod, opts KillOptions) error

// KillPod calls f.
func (f PodKillerFunc) KillPod(ctx context.Context, pod *v1.Pod, opts KillOptions) error {
	return f(ctx, pod, opts)
}

// ImageGC frees image file system space: DeleteUnusedImages removes every
// image no container uses (the image GC's minimum age still applies), as
// the kubelet's ImageGC.
type ImageGC interface {
	DeleteUnusedImages(ctx context.Context) error
}

// ContainerGC frees space held by dead containers: DeleteAllUnusedContainers
// removes every one of them, as the kubelet's ContainerGC.
type ContainerGC interface {
	DeleteAllUnusedContainers(ctx context.Context) error
}

// ReclaimFunc is a function that is an ImageGC or a ContainerGC.
type ReclaimFunc func(ctx context.Context) error

// DeleteUnusedImages calls f.
func (f ReclaimFunc) DeleteUnusedImages(ctx context.Context) error { return f(ctx) }

// DeleteAllUnusedContainers calls f.
func (f ReclaimFunc) DeleteAllUnusedContainers(ctx context.Context) error { return f(ctx) }

// DiskInfo says how the runtime's file systems lie, the kubelet's
// DiskInfoProvider and ContainerGC's IsContainerFsSeparateFromImageFs.
type DiskInfo interface {
	// HasDedicatedImageFs reports whether images are on a file system
	// other than the node's.
	HasDedicatedImageFs(ctx context.Context) (bool, error)
	// IsContainerFsSeparateFromImageFs reports whether writable layers
	// are on a file system other than images.
	IsContainerFsSeparateFromImageFs(ctx context.Context) bool
}

// EventRecorder records an event; client-go's record.EventRecorder fits.
// If it has AnnotatedEventf too (client-go's has), eviction events carry
// the kubelet's annotations (offending_containers, starved_resource ...).
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

type annotatedRecorder interface {
	AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...interface{})
}

// Config configures a Manager. Summary, ActivePods and Killer are
// required; every other field has the default its comment gives.
type Config struct {
	// Summary gives the node's and pods' usage. Required.
	Summary SummaryProvider
	// ActivePods lists the pods that may be evicted: admitted, not
	// terminal. The manager sorts a copy. Required.
	ActivePods func() []*v1.Pod
	// Killer stops an evicted pod. Required.
	Killer PodKiller
	// PodCleanedUp reports whether an evicted pod's resources are
	// reclaimed; the manager waits for it (at most 30s, polling every
	// second) before its next pass, as the kubelet's. nil: no wait.
	PodCleanedUp func(*v1.Pod) bool

	// Thresholds are the hard and soft thresholds. nil:
	// DefaultThresholds(), the kubelet's; empty: none (the manager then
	// does nothing, as the kubelet's).
	Thresholds []Threshold
	// PressureTransitionPeriod is how long a pressure condition stays
	// after its last threshold went, the kubelet's
	// --eviction-pressure-transition-period. Default 5m.
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriodSeconds is the grace period of pods evicted for a
	// soft threshold when the pod's own is longer, the kubelet's
	// --eviction-max-pod-grace-period. Default 0, the kubelet's (the
	// runtime's minimum grace period then applies); negative: the pod's.
	MaxPodGracePeriodSeconds int64
	// MonitoringInterval is how often thresholds are checked, the
	// kubelet's housekeeping interval. Default 10s.
	MonitoringInterval time.Duration

	// ImageGC and ContainerGC reclaim disk before any pod is evicted for
	// a disk signal. Optional: without, pods are evicted at once.
	ImageGC     ImageGC
	ContainerGC ContainerGC
	// DiskInfo says whether the image and container file systems are
	// apart. nil: told from the first summary (a file system of other
	// capacity or inodes than nodefs is dedicated).
	DiskInfo DiskInfo

	// MemoryNotifier, if set, wakes the manager when memory crosses a
	// memory threshold, between monitoring intervals, as the kubelet's
	// --kernel-memcg-notification (see ThresholdNotifier). Optional.
	MemoryNotifier NotifierFactory

	// Recorder receives EvictionThresholdMet events on NodeRef and
	// Evicted events on pods. Optional.
	Recorder EventRecorder
	// NodeRef is the Node in events. Optional.
	NodeRef *v1.ObjectReference
	// Clock drives the monitoring. Default the real clock.
	Clock clock.WithTicker
	// Log receives the manager's logs. Default logr.Discard().
	Log logr.Logger
}

// Manager is the kubelet's eviction manager: it watches the node's
// signals, reports pressure, reclaims node-level resources and evicts pods.
// It is a node.PressureSource and an admission.PodAdmitHandler.
type Manager struct {
	cfg Config
	log logr.Logger

	mu sync.RWMutex
	// conditions are the pressure conditions reported (admission,
	// PressureSource).
	conditions conditionSet

	// The rest is owned by the goroutine running synchronize.
	thresholds       []Threshold
	lastObservations observations
	firstObserved    firstObserved
	lastCondition    conditionsLastObserved
	met              []Threshold
	rank             map[Signal]ranker
	reclaim          map[Signal][]ReclaimFunc
	notifiers        []*memoryThresholdNotifier
	notifiersAt      time.Time
	wake             chan struct{}
	running          sync.Mutex
}

// New checks c and fills its defaults.
func New(c Config) (*Manager, error) {
	if c.Summary == nil {
		return nil, fmt.Errorf("%w: Summary is required", ErrInvalidConfig)
	}
	if c.ActivePods == nil {
		return nil, fmt.Errorf("%w: ActivePods is required", ErrInvalidConfig)
	}
	if c.Killer == nil {
		return nil, fmt.Errorf("%w: Killer is required", ErrInvalidConfig)
	}
	if c.PressureTransitionPeriod < 0 || c.MonitoringInterval < 0 {
		return nil, fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	}
	for _, t := range c.Thresholds {
		if _, ok := signalOf(t.Signal); !ok {
			return nil, fmt.Errorf("%w: unsupported eviction signal %s", ErrInvalidConfig, t.Signal)
		}
		if t.GracePeriod < 0 {
			return nil, fmt.Errorf("%w: threshold %s: negative grace period", ErrInvalidConfig, t)
		}
	}
	if c.Thresholds == nil {
		c.Thresholds = DefaultThresholds()
	}
	if c.PressureTransitionPeriod == 0 {
		c.PressureTransitionPeriod = 5 * time.Minute
	}
	if c.MonitoringInterval == 0 {
		c.MonitoringInterval = 10 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	m := &Manager{cfg: c, log: c.Log, thresholds: slices.Clone(c.Thresholds), wake: make(chan struct{}, 1)}
	if c.MemoryNotifier != nil {
		for _, t := range m.thresholds {
			if t.Signal == SignalMemoryAvailable || t.Signal == SignalAllocatableMemoryAvailable {
				m.notifiers = append(m.notifiers, &memoryThresholdNotifier{threshold: t, factory: c.MemoryNotifier, wake: m.wake})
			}
		}
	}
	return m, nil
}

// MemoryPressure reports whether the node is under memory pressure.
func (m *Manager) MemoryPressure() bool { return m.has(memoryPressure) }

// DiskPressure reports whether the node is under disk pressure.
func (m *Manager) DiskPressure() bool { return m.has(diskPressure) }

// PIDPressure reports whether the node is under PID pressure.
func (m *Manager) PIDPressure() bool { return m.has(pidPressure) }

func (m *Manager) has(c conditionSet) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.conditions&c != 0
}

// Admit refuses pods the node cannot take under pressure, as the
// kubelet's eviction admission: under memory pressure alone, BestEffort
// pods that do not tolerate the node.kubernetes.io/memory-pressure
// NoSchedule taint; under any other pressure, every pod. Critical pods
// (podutil.IsCritical) are admitted. The reason is Evicted, the message
// "The node had condition: [MemoryPressure]. ".
func (m *Manager) Admit(attrs *admission.PodAdmitAttributes) admission.PodAdmitResult {
	m.mu.RLock()
	conds := m.conditions
	m.mu.RUnlock()
	if conds == 0 || podutil.IsCritical(attrs.Pod) {
		return admission.PodAdmitResult{Admit: true}
	}
	if conds == memoryPressure {
		if podutil.QOSClass(attrs.Pod) != v1.PodQOSBestEffort {
			return admission.PodAdmitResult{Admit: true}
		}
		taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
		for i := range attrs.Pod.Spec.Tolerations {
			if attrs.Pod.Spec.Tolerations[i].ToleratesTaint(m.log, taint, false) {
				return admission.PodAdmitResult{Admit: true}
			}
		}
	}
	return admission.PodAdmitResult{Reason: Reason, Message: fmt.Sprintf(nodeConditionMessageFmt, conds.list())}
}

var _ admission.PodAdmitHandler = (*Manager)(nil)

// Thresholds returns the thresholds in force: Config.Thresholds with the
// containerfs ones the first pass derived from nodefs's or imagefs's.
// Only for the goroutine of Run, or after it returned.
func (m *Manager) Thresholds() []Threshold { return slices.Clone(m.thresholds) }

// Run checks the thresholds every MonitoringInterval (and when a memory
// notifier fires) until ctx ends; after an eviction it waits for the pod
// to be cleaned up first, as the kubelet's. It returns nil when ctx ends.
// Run may run once at a time.
func (m *Manager) Run(ctx context.Context) error {
	if !m.running.TryLock() {
		return errors.New("eviction: Run called twice")
	}
	defer m.running.Unlock()
	defer m.stopNotifiers()
	for {
		evicted, err := m.Synchronize(ctx)
		if err != nil && ctx.Err() == nil {
			m.log.Error(err, "Eviction manager: failed to synchronize")
		}
		if len(evicted) > 0 && err == nil && m.cfg.PodCleanedUp != nil {
			m.waitForPodsCleanup(ctx, evicted)
		} else {
			t := m.cfg.Clock.NewTimer(m.cfg.MonitoringInterval)
			select {
			case <-ctx.Done():
			case <-t.C():
			case <-m.wake:
				m.log.V(2).Info("Eviction manager: memory threshold crossed")
			}
			t.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (m *Manager) waitForPodsCleanup(ctx context.Context, pods []*v1.Pod) {
	timeout := m.cfg.Clock.NewTimer(podCleanupTimeout)
	defer timeout.Stop()
	tick := m.cfg.Clock.NewTicker(podCleanupPollFreq)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timeout.C():
			m.log.Info("Eviction manager: timed out waiting for pods to be cleaned up", "pods", names(pods))
			return
		case <-tick.C():
			if !slices.ContainsFunc(pods, func(p *v1.Pod) bool { return !m.cfg.PodCleanedUp(p) }) {
				m.log.Info("Eviction manager: pods successfully cleaned up", "pods", names(pods))
				return
			}
		}
	}
}

func names(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = podutil.FullName(p)
	}
	return out
}

// Synchronize is one pass of the kubelet's eviction manager: observe the
// signals, update the thresholds met and the pressure conditions, and if
// a threshold is met past its grace period, reclaim node-level resources
// or evict one pod. It returns the pods evicted. Run calls it; a test or a
// simulation may call it instead of Run (never both at once).
func (m *Manager) Synchronize(ctx context.Context) ([]*v1.Pod, error) {
	if len(m.thresholds) == 0 {
		return nil, nil
	}
	summary, err := m.cfg.Summary.Get(ctx, true)
	if err != nil {
		m.log.Error(err, "Eviction manager: failed to get summary stats")
		return nil, nil
	}
	if summary == nil {
		return nil, errors.New("eviction manager: no summary")
	}
	if m.rank == nil {
		if err := m.detectFs(ctx, summary); err != nil {
			return nil, err
		}
	}
	m.updateNotifiers(summary)
	obs, stats := observe(summary, true)

	ts := thresholdsMet(m.thresholds, obs, false)
	if len(m.met) > 0 {
		ts = mergeThresholds(ts, thresholdsMet(m.met, obs, true))
	}
	now := m.cfg.Clock.Now()
	m.firstObserved = thresholdsFirstObservedAt(ts, m.firstObserved, now)
	m.lastCondition.update(nodeConditions(ts), now)
	conds := m.lastCondition.since(m.cfg.PressureTransitionPeriod, now)
	ts = thresholdsMetGracePeriod(m.firstObserved, now)
	m.met = ts
	ts = thresholdsUpdatedStats(ts, obs, m.lastObservations)
	m.lastObservations = obs
	m.mu.Lock()
	m.conditions = conds
	m.mu.Unlock()

	if len(ts) == 0 {
		return nil, nil
	}
	// Memory first; thresholds without a resource last (none here).
	slices.SortStableFunc(ts, func(a, b Threshold) int {
		am, bm := a.Signal == SignalMemoryAvailable || a.Signal == SignalAllocatableMemoryAvailable,
			b.Signal == SignalMemoryAvailable || b.Signal == SignalAllocatableMemoryAvailable
		switch {
		case am && !bm:
			return -1
		case bm && !am:
			return 1
		}
		return 0
	})
	t := ts[0]
	info, _ := signalOf(t.Signal)
	res := info.resource
	m.log.Info("Eviction manager: attempting to reclaim", "resourceName", res)
	if r := m.cfg.Recorder; r != nil && m.cfg.NodeRef != nil {
		r.Eventf(m.cfg.NodeRef, v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim %s", res)
	}
	if m.reclaimNodeLevel(ctx, t.Signal, res) {
		m.log.Info("Eviction manager: able to reduce resource pressure without evicting pods.", "resourceName", res)
		return nil, nil
	}
	rank := m.rank[t.Signal]
	pods := slices.Clone(m.cfg.ActivePods())
	if len(pods) == 0 {
		m.log.Error(nil, "Eviction manager: eviction thresholds have been met, but no pods are active to evict")
		return nil, nil
	}
	rank(pods, stats)
	if m.log.V(2).Enabled() {
		m.log.V(2).Info("Eviction manager: pods ranked for eviction", "pods", names(pods))
	}
	grace := int64(hardEvictionGracePeriodSeconds)
	if !t.Hard() {
		grace = m.cfg.MaxPodGracePeriodSeconds
	}
	for _, pod := range pods {
		if podutil.IsCritical(pod) {
			m.log.Error(nil, "Eviction manager: cannot evict a critical pod", "pod", podutil.FullName(pod))
			continue
		}
		msg, ann := evictionMessage(res, pod, stats, ts, obs)
		m.evict(ctx, pod, grace, msg, ann)
		return []*v1.Pod{pod}, nil
	}
	m.log.Info("Eviction manager: unable to evict any pods from the node")
	return nil, nil
}

// evict kills pod as the kubelet's evictPod.
func (m *Manager) evict(ctx context.Context, pod *v1.Pod, grace int64, msg string, ann map[string]string) {
	if r := m.cfg.Recorder; r != nil {
		if ar, ok := r.(annotatedRecorder); ok {
			ar.AnnotatedEventf(pod, ann, v1.EventTypeWarning, Reason, "%s", msg)
		} else {
			r.Eventf(pod, v1.EventTypeWarning, Reason, "%s", msg)
		}
	}
	opts := KillOptions{Reason: Reason, Message: msg,
		Condition: v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: ReasonTerminationByKubelet, Message: msg}}
	if grace >= 0 {
		opts.GracePeriodSeconds = &grace
	}
	m.log.V(3).Info("Evicting pod", "pod", podutil.FullName(pod), "podUID", pod.UID, "message", msg)
	if err := m.cfg.Killer.KillPod(ctx, pod, opts); err != nil {
		m.log.Error(err, "Eviction manager: pod failed to evict", "pod", podutil.FullName(pod))
	} else {
		m.log.Info("Eviction manager: pod is evicted successfully", "pod", podutil.FullName(pod))
	}
}

// reclaimNodeLevel runs the signal's node-level reclaim (dead containers,
// unused images) and reports whether, by a fresh summary, no threshold is
// met any more (minimum reclaim included): no pod need go.
func (m *Manager) reclaimNodeLevel(ctx context.Context, s Signal, res v1.ResourceName) bool {
	fns := m.reclaim[s]
	if len(fns) == 0 {
		return false
	}
	for _, f := range fns {
		if err := f(ctx); err != nil {
			m.log.Info("Eviction manager: unexpected error when attempting to reduce resource pressure", "resourceName", res, "err", err)
		}
	}
	summary, err := m.cfg.Summary.Get(ctx, true)
	if err != nil || summary == nil {
		m.log.Error(err, "Eviction manager: failed to get summary stats after resource reclaim")
		return false
	}
	obs, _ := observe(summary, false)
	return len(thresholdsMet(m.thresholds, obs, true)) == 0
}

// detectFs learns how the file systems lie, on the first pass, and builds
// the rankings, the reclaim functions and the containerfs thresholds.
func (m *Manager) detectFs(ctx context.Context, s *statsapi.Summary) error {
	var dedicated, split bool
	if d := m.cfg.DiskInfo; d != nil {
		var err error
		if dedicated, err = d.HasDedicatedImageFs(ctx); err != nil {
			return fmt.Errorf("eviction manager: failed to get HasDedicatedImageFs: %w", err)
		}
		split = d.IsContainerFsSeparateFromImageFs(ctx)
	} else if r := s.Node.Runtime; r != nil {
		dedicated = otherFs(s.Node.Fs, r.ImageFs)
		split = r.ContainerFs != nil && otherFs(r.ImageFs, r.ContainerFs)
	}
	var err error
	m.thresholds, err = updateContainerFsThresholds(m.thresholds, dedicated, split)
	if err != nil {
		m.log.Error(err, "Eviction manager: found conflicting containerfs eviction. Ignoring.")
	}
	m.rank = rankers(dedicated, split)
	m.reclaim = m.reclaimFuncs(dedicated, split)
	m.log.V(1).Info("FileSystem detection", "DedicatedImageFs", dedicated, "SplitImageFs", split)
	return nil
}

// otherFs guesses whether b is another file system than a: the summary
// names no device, so a different capacity or inode count tells.
func otherFs(a, b *statsapi.FsStats) bool {
	if a == nil || b == nil {
		return false
	}
	differ := func(x, y *uint64) bool { return x != nil && y != nil && *x != *y }
	return differ(a.CapacityBytes, b.CapacityBytes) || differ(a.Inodes, b.Inodes)
}

// reclaimFuncs are the kubelet's buildSignalToNodeReclaimFuncs.
func (m *Manager) reclaimFuncs(dedicated, split bool) map[Signal][]ReclaimFunc {
	var containers, images []ReclaimFunc
	if m.cfg.ContainerGC != nil {
		containers = []ReclaimFunc{m.cfg.ContainerGC.DeleteAllUnusedContainers}
	}
	if m.cfg.ImageGC != nil {
		images = []ReclaimFunc{m.cfg.ImageGC.DeleteUnusedImages}
	}
	both := append(slices.Clone(containers), images...)
	r := map[Signal][]ReclaimFunc{}
	set := func(bytes, inodes Signal, fns []ReclaimFunc) { r[bytes], r[inodes] = fns, fns }
	switch {
	case dedicated && !split:
		// nodefs holds logs only: nothing to reclaim there.
		set(SignalImageFsAvailable, SignalImageFsInodesFree, both)
		set(SignalContainerFsAvailable, SignalContainerFsInodesFree, both)
	case dedicated && split:
		set(SignalImageFsAvailable, SignalImageFsInodesFree, images)
		set(SignalNodeFsAvailable, SignalNodeFsInodesFree, containers)
		set(SignalContainerFsAvailable, SignalContainerFsInodesFree, containers)
	default:
		set(SignalNodeFsAvailable, SignalNodeFsInodesFree, both)
		set(SignalImageFsAvailable, SignalImageFsInodesFree, both)
		set(SignalContainerFsAvailable, SignalContainerFsInodesFree, both)
	}
	return r
}

// updateContainerFsThresholds replaces any containerfs threshold with
// nodefs's (one file system, or writable layers apart from images) or
// imagefs's (a dedicated image file system holding the writable layers),
// as the kubelet's UpdateContainerFsThresholds; a configured containerfs
// threshold is reported in the error and ignored.
func updateContainerFsThresholds(ts []Threshold, dedicated, split bool) ([]Threshold, error) {
	var errs []error
	out := ts[:0:0]
	for _, t := range ts {
		if t.Signal == SignalContainerFsAvailable || t.Signal == SignalContainerFsInodesFree {
			errs = append(errs, fmt.Errorf("found %s for eviction, ignoring", t.Signal))
			continue
		}
		out = append(out, t)
	}
	bytes, inodes := SignalNodeFsAvailable, SignalNodeFsInodesFree
	if dedicated && !split {
		bytes, inodes = SignalImageFsAvailable, SignalImageFsInodesFree
	}
	for _, t := range slices.Clone(out) {
		switch t.Signal {
		case bytes:
			t.Signal = SignalContainerFsAvailable
		case inodes:
			t.Signal = SignalContainerFsInodesFree
		default:
			continue
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}
