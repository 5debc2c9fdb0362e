package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// ErrInvalidConfig is wrapped by NewManager's errors.
var ErrInvalidConfig = errors.New("status: invalid config")

// PodClient is the part of the apiserver's pod API the Manager uses, for one
// namespace. client-go's typed CoreV1().Pods(namespace) satisfies it as it is.
type PodClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Pod, error)
	Create(ctx context.Context, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// StatusUpdater is the update (PUT) of the status subresource, which
// Config.UpdateKnownStatus uses. client-go's typed CoreV1().Pods(namespace)
// has it; a PodClient without it is patched.
type StatusUpdater interface {
	UpdateStatus(ctx context.Context, pod *v1.Pod, opts metav1.UpdateOptions) (*v1.Pod, error)
}

// NodeGetter reads the agent's Node, for the owner reference of mirror
// pods. client-go's typed CoreV1().Nodes() satisfies it.
type NodeGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
}

// PodDeletionSafety tells whether a pod may still have running containers.
// Until it says no, a pod's terminal phase is not sent and the pod is not
// deleted from the apiserver. The agent fills it from its pod workers.
type PodDeletionSafety interface {
	PodCouldHaveRunningContainers(pod *v1.Pod) bool
}

// DeletionSafetyFunc answers PodCouldHaveRunningContainers by the pod's
// UID; podworkers.PodWorkers.CouldHaveRunningContainers fits:
// DeletionSafety: status.DeletionSafetyFunc(workers.CouldHaveRunningContainers).
type DeletionSafetyFunc func(uid types.UID) bool

// PodCouldHaveRunningContainers calls f with pod's UID.
func (f DeletionSafetyFunc) PodCouldHaveRunningContainers(pod *v1.Pod) bool { return f(pod.UID) }

// Config configures a Manager. The zero value is a valid standalone
// manager that keeps statuses and sends nothing.
type Config struct {
	// PodClient returns the pod client of a namespace. nil: no apiserver;
	// statuses are kept and served, nothing is sent.
	PodClient func(namespace string) PodClient
	// NodeName is the agent's node, for mirror pods. Empty: no mirror pods
	// are created.
	NodeName string
	// Nodes reads the Node for the mirror pods' owner reference, which the
	// apiserver's NodeRestriction admission requires. nil: mirror pods get
	// no owner reference.
	Nodes NodeGetter
	// DeletionSafety is asked before a pod is reported terminal or deleted.
	// nil: a pod has no running containers once TerminatePod was called.
	DeletionSafety PodDeletionSafety
	// SyncPeriod is how often every status is reconciled with the
	// apiserver. Default 10s.
	SyncPeriod time.Duration
	// SyncWorkers is how many pods' statuses are synced at once. Default
	// 8: many pods starting together (a virtual node's burst) would
	// otherwise wait for each other's round trips; the kubelet syncs one at
	// a time. The pod client's own rate limit still applies.
	SyncWorkers int
	// ConflictRetries is how often a sync that met a conflict is retried,
	// with back-off from 100ms doubling. Default 3; negative: no retry.
	ConflictRetries int
	// UpdateKnownStatus writes a status that needs no read (see
	// knownAPIPod) with an update of the status subresource (PUT, the
	// PodClient's StatusUpdater) carrying the pod's resourceVersion, rather
	// than a strategic-merge patch: the apiserver applies it for less CPU
	// (a patch converts the pod to a map and back and merges by schema:
	// half of what a status write cost the apiserver in
	// docs/performance.md's profile), and the apiserver's CPU is what
	// bounds a virtual node's burst of pods to Running. The update
	// sends what the patch would make of the pod; a copy that is no longer
	// current answers Conflict, and the pod is then read and patched.
	// Default false: the kubelet patches.
	UpdateKnownStatus bool
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Log defaults to logr.Discard().
	Log logr.Logger
}

const (
	defaultSyncPeriod      = 10 * time.Second
	defaultConflictRetries = 3
	defaultSyncWorkers     = 8
	conflictBackoff        = 100 * time.Millisecond
	// maxTerminationMessageBytes is shared by a pod's containers, as the
	// kubelet's MaxPodTerminationMessageLogLength.
	maxTerminationMessageBytes = 1024 * 12
)

// Manager is the source of truth for the statuses of the agent's pods: it
// caches the latest status of each pod with a version, and syncs changed
// statuses to the apiserver. All methods are safe for concurrent use.
type Manager struct {
	client          func(namespace string) PodClient
	nodeName        string
	nodes           NodeGetter
	safety          PodDeletionSafety
	syncPeriod      time.Duration
	conflictRetries int
	syncWorkers     int
	updateKnown     bool
	clock           clock.WithTicker
	log             logr.Logger

	// signal wakes the sync loop to delete orphaned mirror pods.
	signal chan struct{}

	// qmu guards the sync workers' queue (see dispatch.go): the pods whose
	// status changed, in order, each at most once (queued), and the pods
	// being synced (busy), by a worker or a batch, which no one else syncs
	// meanwhile; the workers running, started with workCtx (nil until
	// Run), and waited for in workerWG. stopping ends the workers. Lock
	// order: mu, apiMu, qmu.
	qmu      sync.Mutex
	queue    []types.UID
	queued   map[types.UID]bool
	busy     map[types.UID]bool
	workers  int
	workCtx  context.Context
	workerWG sync.WaitGroup
	stopping bool

	mu       sync.Mutex
	statuses map[types.UID]*versionedStatus
	// mirrors maps a static pod's UID to its mirror pod in the apiserver,
	// and statics the mirror's UID back.
	mirrors map[types.UID]mirrorRef
	statics map[types.UID]types.UID
	// orphans are mirror pods to delete: their static pod is gone.
	orphans []mirrorRef
	// lastVersion is the last version handed out.
	lastVersion uint64

	// syncMu serializes batches of syncs; a batch syncs different pods at
	// once, and apiMu guards what they share: apiVersions, apiPods and
	// nodeUID.
	syncMu sync.Mutex
	apiMu  sync.Mutex
	// apiVersions is the last version of each status the apiserver has, by
	// the UID of the pod in the apiserver (the mirror's for static pods).
	apiVersions map[types.UID]uint64
	// apiPods is the apiserver's answer to the last status patch of each
	// pod, the base of its next patch (see syncPodOnce).
	apiPods map[types.UID]*v1.Pod
	nodeUID types.UID
}

type versionedStatus struct {
	// version grows with every change of status.
	version uint64
	pod     *v1.Pod
	status  v1.PodStatus
	// finished: TerminatePod was called; the pod will not run again.
	finished bool
}

type mirrorRef struct {
	namespace, name string
	uid             types.UID
}

// NewManager returns a Manager; see Config for the defaults.
func NewManager(c Config) (*Manager, error) {
	if c.SyncPeriod < 0 {
		return nil, fmt.Errorf("status: SyncPeriod %v is negative: %w", c.SyncPeriod, ErrInvalidConfig)
	}
	if c.SyncPeriod == 0 {
		c.SyncPeriod = defaultSyncPeriod
	}
	if c.SyncWorkers < 0 {
		return nil, fmt.Errorf("status: SyncWorkers %d is negative: %w", c.SyncWorkers, ErrInvalidConfig)
	}
	if c.SyncWorkers == 0 {
		c.SyncWorkers = defaultSyncWorkers
	}
	if c.ConflictRetries == 0 {
		c.ConflictRetries = defaultConflictRetries
	} else if c.ConflictRetries < 0 {
		c.ConflictRetries = 0
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	m := &Manager{
		client:          c.PodClient,
		nodeName:        c.NodeName,
		nodes:           c.Nodes,
		safety:          c.DeletionSafety,
		syncPeriod:      c.SyncPeriod,
		conflictRetries: c.ConflictRetries,
		syncWorkers:     c.SyncWorkers,
		updateKnown:     c.UpdateKnownStatus,
		clock:           c.Clock,
		log:             c.Log,
		signal:          make(chan struct{}, 1),
		statuses:        map[types.UID]*versionedStatus{},
		mirrors:         map[types.UID]mirrorRef{},
		statics:         map[types.UID]types.UID{},
		apiVersions:     map[types.UID]uint64{},
		apiPods:         map[types.UID]*v1.Pod{},
		queued:          map[types.UID]bool{},
		busy:            map[types.UID]bool{},
	}
	return m, nil
}

// Run syncs statuses with the apiserver until ctx ends, then returns:
// each change at once, by up to SyncWorkers workers (started while pods
// are queued, none when idle) that take changed pods in the order they
// changed, and every SyncPeriod all pods. Without a
// PodClient it only waits for ctx. Call it once, in its own goroutine.
func (m *Manager) Run(ctx context.Context) {
	if m.client == nil {
		m.log.Info("No pod client; statuses are kept but not sent")
		<-ctx.Done()
		return
	}
	m.startWorkers(ctx)
	defer m.stopWorkers()
	t := m.clock.NewTicker(m.syncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.signal:
			m.deleteOrphans(ctx)
		case <-t.C():
			m.syncBatch(ctx)
		}
	}
}

// Sync sends every status the apiserver does not have yet, deletes
// finished pods and orphaned mirror pods, and returns when done, as the
// periodic reconcile does. It is for tests and for a final flush on
// shutdown; Run does the same on its own. Without a PodClient it does
// nothing.
func (m *Manager) Sync(ctx context.Context) {
	if m.client == nil {
		return
	}
	m.syncBatch(ctx)
}

// GetPodStatus returns a copy of the cached status of a pod, by its UID or,
// for a static pod, by its mirror pod's UID; the caller owns the copy and
// may modify it. SharedPodStatus is the read-only one without the copy (the
// Shared prefix means so throughout nodekit).
func (m *Manager) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs, ok := m.statuses[m.translateLocked(uid)]
	if !ok {
		return v1.PodStatus{}, false
	}
	return *vs.status.DeepCopy(), true
}

// SharedPodStatus is GetPodStatus without the copy: read only, for hot
// paths that only read (the agent generates every new status on top of the last one). The
// status is the Manager's own: it never modifies a stored status (a change
// stores a new one), and the caller must not modify it either.
func (m *Manager) SharedPodStatus(uid types.UID) (*v1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs, ok := m.statuses[m.translateLocked(uid)]
	if !ok {
		return nil, false
	}
	return &vs.status, true
}

func (m *Manager) translateLocked(uid types.UID) types.UID {
	if s, ok := m.statics[uid]; ok {
		return s
	}
	return uid
}

// SetPodStatus caches status (a copy) as the pod's latest and schedules a
// sync if it differs from the cached one in what the agent owns. A pod being
// deleted is always synced, so that its deletion can complete. The Manager
// keeps pod; callers treat pods as immutable, as in the kubelet.
func (m *Manager) SetPodStatus(pod *v1.Pod, status v1.PodStatus) {
	if pod == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	status = *status.DeepCopy()
	m.updateLocked(pod, status, pod.DeletionTimestamp != nil, false)
}

// SetContainerReadiness sets the readiness of a container of a pod (by
// either UID of a static pod) as the prober reports it, and updates the
// Ready and ContainersReady conditions. Unknown pods and containers are
// ignored.
func (m *Manager) SetContainerReadiness(podUID types.UID, id runtime.ContainerID, ready bool) {
	m.setContainer(podUID, id, func(pod *v1.Pod, st *v1.PodStatus, cs *v1.ContainerStatus) bool {
		if cs.Ready == ready {
			return false
		}
		cs.Ready = ready
		st.Conditions = setCondition(st.Conditions,
			podReadyCondition(&pod.Spec, st.Conditions, st.InitContainerStatuses, st.ContainerStatuses, st.Phase))
		st.Conditions = setCondition(st.Conditions,
			containersReadyCondition(&pod.Spec, st.InitContainerStatuses, st.ContainerStatuses, st.Phase))
		return true
	})
}

// SetContainerStartup sets whether a container has started as its startup
// probe reports it. Unknown pods and containers are ignored.
func (m *Manager) SetContainerStartup(podUID types.UID, id runtime.ContainerID, started bool) {
	m.setContainer(podUID, id, func(_ *v1.Pod, _ *v1.PodStatus, cs *v1.ContainerStatus) bool {
		if cs.Started != nil && *cs.Started == started {
			return false
		}
		cs.Started = &started
		return true
	})
}

func (m *Manager) setContainer(podUID types.UID, id runtime.ContainerID, change func(*v1.Pod, *v1.PodStatus, *v1.ContainerStatus) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs, ok := m.statuses[m.translateLocked(podUID)]
	if !ok {
		m.log.V(4).Info("Container probe result for a pod without status", "podUID", podUID, "containerID", id.String())
		return
	}
	cid := id.String()
	if containerByID(&vs.status, cid) == nil {
		m.log.V(4).Info("Container probe result for an unknown container", "podUID", podUID, "containerID", cid)
		return
	}
	st := *vs.status.DeepCopy()
	if !change(vs.pod, &st, containerByID(&st, cid)) {
		return
	}
	m.updateLocked(vs.pod, st, false, false)
}

func containerByID(st *v1.PodStatus, cid string) *v1.ContainerStatus {
	for i := range st.ContainerStatuses {
		if st.ContainerStatuses[i].ContainerID == cid {
			return &st.ContainerStatuses[i]
		}
	}
	for i := range st.InitContainerStatuses {
		if st.InitContainerStatuses[i].ContainerID == cid {
			return &st.InitContainerStatuses[i]
		}
	}
	return nil
}

// Resend makes the next sync send the pod's status again, even if the
// apiserver has its version: for a terminal phase held back while the
// pod's containers could run, once they are known stopped. The agent calls
// it from its pod workers. Unknown pods are ignored.
func (m *Manager) Resend(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs, ok := m.statuses[uid]
	if !ok || !isTerminalPhase(vs.status.Phase) {
		return
	}
	m.lastVersion++
	m.statuses[uid] = &versionedStatus{version: m.lastVersion, status: vs.status, pod: vs.pod, finished: vs.finished}
	m.enqueue(uid)
}

// TerminatePod marks the end of a pod's life: every container that may
// still be running (the agent could not see it stop) is reported terminated
// with reason ContainerStatusUnknown and exit code 137, and the phase becomes
// Failed unless it is already terminal (static pods keep their phase, as in
// the kubelet). From now on the pod may be deleted from the apiserver.
func (m *Manager) TerminatePod(pod *v1.Pod) {
	if pod == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := &pod.Status
	if vs, ok := m.statuses[pod.UID]; ok {
		old = &vs.status
	}
	st := *old.DeepCopy()
	lost := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		Reason: ContainerStatusUnknown, Message: lostMessageTerminated, ExitCode: lostExitCode,
	}}
	if podHasInitialized(pod) {
		for i := range st.ContainerStatuses {
			if st.ContainerStatuses[i].State.Terminated == nil {
				st.ContainerStatuses[i].State = *lost.DeepCopy()
			}
		}
	}
	// Init containers that never started (the waiting suffix) stay waiting.
	for i := range startedInitContainers(st.InitContainerStatuses) {
		if st.InitContainerStatuses[i].State.Terminated == nil {
			st.InitContainerStatuses[i].State = *lost.DeepCopy()
		}
	}
	if !podutil.IsStaticPod(pod) && !isTerminalPhase(st.Phase) {
		st.Phase = v1.PodFailed
	}
	m.updateLocked(pod, st, true, true)
}

// podHasInitialized reports whether the pod has ever got past its init
// containers, as the apiserver's status shows.
func podHasInitialized(pod *v1.Pod) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.LastTerminationState.Terminated != nil || s.State.Waiting == nil {
			return true
		}
	}
	if n := len(pod.Status.InitContainerStatuses); n > 0 {
		last := pod.Status.InitContainerStatuses[n-1]
		if t := last.LastTerminationState.Terminated; t != nil && t.ExitCode == 0 {
			return true
		}
		if t := last.State.Terminated; t != nil && t.ExitCode == 0 {
			return true
		}
	}
	return false
}

// startedInitContainers returns the init container statuses without the
// suffix that has never run, but always at least the first.
func startedInitContainers(cs []v1.ContainerStatus) []v1.ContainerStatus {
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].State.Waiting == nil || cs[i].LastTerminationState.Terminated != nil {
			return cs[:i+1]
		}
	}
	if len(cs) > 0 {
		return cs[:1]
	}
	return nil
}

// RemoveOrphanedStatuses forgets the statuses of pods not in keep, and
// schedules the deletion of their mirror pods.
func (m *Manager) RemoveOrphanedStatuses(keep map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	removed := false
	for uid := range m.statuses {
		if !keep[uid] {
			m.deleteLocked(uid, true)
			removed = true
		}
	}
	if removed && len(m.orphans) > 0 {
		m.signalLocked()
	}
}

// deleteLocked forgets a pod; with orphanMirror its mirror pod is to be
// deleted too.
func (m *Manager) deleteLocked(uid types.UID, orphanMirror bool) {
	delete(m.statuses, uid)
	if mr, ok := m.mirrors[uid]; ok {
		delete(m.mirrors, uid)
		delete(m.statics, mr.uid)
		if orphanMirror {
			m.orphans = append(m.orphans, mr)
		}
	}
}

func (m *Manager) signalLocked() {
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

// updateLocked applies the guards, stores status as the pod's new version
// if it changed (or force), and queues the pod for a sync worker.
func (m *Manager) updateLocked(pod *v1.Pod, status v1.PodStatus, force, finished bool) {
	vs, cached := m.statuses[pod.UID]
	var old *v1.PodStatus
	switch {
	case cached:
		old = &vs.status
		if vs.finished && !finished && !podutil.IsStaticPod(pod) {
			m.log.Info("Pod was finished; it stays finished", "pod", podRef(pod))
			finished = true
		}
	default:
		old = &pod.Status
	}

	if err := checkContainerTransitions(old, &status, &pod.Spec); err != nil {
		m.log.Error(err, "Status update aborted", "pod", podRef(pod))
		return
	}
	if isTerminalPhase(old.Phase) && status.Phase != old.Phase {
		m.log.Error(nil, "Pod attempted to leave its terminal phase; phase kept", "pod", podRef(pod),
			"phase", old.Phase, "attempted", status.Phase)
		status.Phase, status.Reason, status.Message = old.Phase, old.Reason, old.Message
	}

	now := metav1.NewTime(m.clock.Now())
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if !ownedByAgent(c.Type) && !sharedWithAgent(c.Type) {
			continue
		}
		c.LastTransitionTime = now
		if _, oc := findCondition(old.Conditions, c.Type); oc != nil && oc.Status == c.Status {
			c.LastTransitionTime = oc.LastTransitionTime
		}
	}
	switch {
	case old.StartTime != nil && !old.StartTime.IsZero():
		t := *old.StartTime
		status.StartTime = &t
	case status.StartTime == nil || status.StartTime.IsZero():
		status.StartTime = &now
	}
	if !podutil.IsStaticPod(pod) {
		// The generation of a static pod is not its mirror's.
		status.ObservedGeneration = pod.Generation
		for i := range status.Conditions {
			if ownedByAgent(status.Conditions[i].Type) {
				status.Conditions[i].ObservedGeneration = pod.Generation
			}
		}
	}
	normalizeStatus(pod, &status)

	if cached && !force && statusEqual(&vs.status, &status) {
		if vs.pod != pod {
			// Entries are immutable once stored (the sync reads them
			// unlocked): replace, keeping the version.
			m.statuses[pod.UID] = &versionedStatus{version: vs.version, pod: pod, status: vs.status, finished: vs.finished}
		}
		return
	}
	// Versions come from one counter, so a pod forgotten and seen again
	// never reuses a version the apiserver already acknowledged.
	m.lastVersion++
	m.statuses[pod.UID] = &versionedStatus{version: m.lastVersion, status: status, pod: pod, finished: finished}
	m.enqueue(pod.UID)
}

func podRef(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
