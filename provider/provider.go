package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/stats"
)

// Event reasons, virtual-kubelet's.
const (
	ReasonCreateFailed  = "ProviderCreateFailed"
	ReasonCreateSuccess = "ProviderCreateSuccess"
	ReasonUpdateFailed  = "ProviderUpdateFailed"
	ReasonUpdateSuccess = "ProviderUpdateSuccess"
	ReasonDeleteFailed  = "ProviderDeleteFailed"
	ReasonDeleteSuccess = "ProviderDeleteSuccess"
	// ReasonProviderFailed is the pod status reason after a failed
	// CreatePod or UpdatePod, as virtual-kubelet sets it.
	ReasonProviderFailed = "ProviderFailed"
)

// EventRecorder records events about pods; client-go's
// record.EventRecorder fits.
type EventRecorder interface {
	Eventf(object kruntime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Config configures a Runtime. Provider is required; every other field has
// the default its comment gives.
type Config struct {
	// Provider runs the pods. If it is also a PodNotifier its
	// notifications drive the pods' statuses; otherwise they are polled.
	Provider PodLifecycleHandler
	// PollPeriod is how often, without NotifyPods, each pod's status is
	// asked with GetPodStatus. Default 5s, as virtual-kubelet's.
	PollPeriod time.Duration
	// DeleteCheckPeriod is how often, while a deletion waits to be
	// confirmed within the pod's grace period, the pod's status is asked
	// (besides notifications). Default 1s.
	DeleteCheckPeriod time.Duration
	// Type is the runtime's type, in the container IDs it makes up.
	// Default "provider".
	Type string
	// EventBuffer is how many status changes a stream holds before its
	// consumer counts as stuck and loses it (it relists then). Default
	// 4096.
	EventBuffer int
	// Recorder receives virtual-kubelet's events about pods (Provider
	// CreateFailed, ...). Optional.
	Recorder EventRecorder
	// Clock drives every timer. Default the real clock.
	Clock clock.WithTicker
	// Log receives the runtime's logs. Default logr.Discard().
	Log logr.Logger
}

// Runtime is a runtime.Runtime (and runtime.StatusOwner) over a pod-level
// provider. Create it with New. It is safe for concurrent use.
type Runtime struct {
	cfg      Config
	p        PodLifecycleHandler
	notifier PodNotifier // nil: polled
	// notifying is closed once NotifyPods was called (the first
	// WatchContainerEvents): no CreatePod, UpdatePod or DeletePod before,
	// as virtual-kubelet's PodController registers it before its workers.
	notifying     chan struct{}
	notifyingOnce sync.Once
	log           logr.Logger
	// summary is the provider's GetStatsSummary, nil without.
	summary stats.SummaryFunc

	mu       sync.Mutex
	pods     map[types.UID]*record
	names    map[string]types.UID // namespace/name -> UID
	seeded   bool
	watchers []*watcher
}

var (
	_ runtime.Runtime     = (*Runtime)(nil)
	_ runtime.StatusOwner = (*Runtime)(nil)
)

// ErrInvalidConfig is wrapped by New when the Config is unusable.
var ErrInvalidConfig = fmt.Errorf("provider: %w", runtime.ErrInvalidConfig)

// New checks c and returns a Runtime; nothing runs until the agent opens
// its event stream (WatchContainerEvents).
func New(c Config) (*Runtime, error) {
	if c.Provider == nil {
		return nil, fmt.Errorf("%w: Provider is required", ErrInvalidConfig)
	}
	if c.PollPeriod < 0 || c.DeleteCheckPeriod < 0 || c.EventBuffer < 0 {
		return nil, fmt.Errorf("%w: negative PollPeriod, DeleteCheckPeriod or EventBuffer", ErrInvalidConfig)
	}
	if c.PollPeriod == 0 {
		c.PollPeriod = 5 * time.Second
	}
	if c.DeleteCheckPeriod == 0 {
		c.DeleteCheckPeriod = time.Second
	}
	if c.Type == "" {
		c.Type = "provider"
	}
	if c.EventBuffer == 0 {
		c.EventBuffer = 4096
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	r := &Runtime{cfg: c, p: c.Provider, log: c.Log, pods: map[types.UID]*record{}, names: map[string]types.UID{}, notifying: make(chan struct{})}
	r.notifier, _ = c.Provider.(PodNotifier)
	r.summary = summaryFunc(c.Provider)
	return r, nil
}

// record is what the runtime knows of one pod.
type record struct {
	uid      types.UID
	name, ns string
	// pod is the pod as last handed to the provider, or as it listed it.
	pod *v1.Pod
	// accepted: CreatePod or UpdatePod took pod.
	accepted bool
	// known: the provider has the pod (accepted, listed or notified).
	known bool
	// status is the provider's latest status of the pod; nil: none yet.
	status *v1.PodStatus
	// rs is status as a runtime.PodStatus, rebuilt on every change.
	rs *runtime.PodStatus
	// deleting: DeletePod was accepted; gone: the provider no longer has
	// the pod (since goneAt).
	deleting, gone bool
	goneAt         time.Time
	createdAt      time.Time
	// changed is closed and replaced on every status change.
	changed chan struct{}
}

func key(ns, name string) string { return ns + "/" + name }

// recordLocked returns the record of uid (or of ns/name if uid is empty or
// unknown), creating one if create. r.mu must be held.
func (r *Runtime) recordLocked(uid types.UID, ns, name string, create bool) *record {
	if uid == "" {
		uid = r.names[key(ns, name)]
	}
	if rec, ok := r.pods[uid]; ok && uid != "" {
		if name != "" && (rec.name != name || rec.ns != ns) {
			delete(r.names, key(rec.ns, rec.name))
			rec.name, rec.ns = name, ns
			r.names[key(ns, name)] = uid
		}
		return rec
	}
	if !create || uid == "" {
		return nil
	}
	rec := &record{uid: uid, name: name, ns: ns, createdAt: r.cfg.Clock.Now(), changed: make(chan struct{})}
	r.pods[uid] = rec
	if name != "" {
		if old, ok := r.names[key(ns, name)]; ok && old != uid {
			// An earlier pod of the same name: the provider addresses pods
			// by name, so the newer UID takes it.
			r.log.V(2).Info("Pod name taken over by a new UID", "pod", key(ns, name), "old", old, "new", uid)
		}
		r.names[key(ns, name)] = uid
	}
	return rec
}

// setStatusLocked records st as rec's status (st is owned by the record
// from now on) and tells the watchers. It reports whether it changed.
func (r *Runtime) setStatusLocked(rec *record, st *v1.PodStatus) bool {
	if st != nil && rec.status != nil && apiequality.Semantic.DeepEqual(rec.status, st) {
		return false
	}
	rec.status = st
	r.changedLocked(rec)
	return true
}

// changedLocked rebuilds rec's runtime status and tells the watchers and
// any deletion waiting on rec.
func (r *Runtime) changedLocked(rec *record) {
	rec.rs = r.runtimeStatus(rec)
	close(rec.changed)
	rec.changed = make(chan struct{})
	r.emitLocked(rec)
}

// Type returns Config.Type.
func (r *Runtime) Type() string { return r.cfg.Type }

// Version returns "1": the provider has no version to ask.
func (r *Runtime) Version(context.Context) (string, error) { return "1", nil }

// Status reports the runtime ready: a provider's health is its node's
// (NodeProvider.Ping through package node).
func (r *Runtime) Status(context.Context) (*runtime.RuntimeStatus, error) {
	return &runtime.RuntimeStatus{Conditions: []runtime.RuntimeCondition{
		{Type: runtime.RuntimeReady, Status: true}, {Type: runtime.NetworkReady, Status: true},
	}}, nil
}

// OwnsPodStatus reports true: the provider owns its pods' API status.
func (r *Runtime) OwnsPodStatus() bool { return true }

// GetPods lists the pods the provider has, from memory: the provider's
// GetPods is called once, on the first call, to find pods that ran before
// (their status comes with them). Each pod has one sandbox, ready while the
// provider has the pod, and one container per container status the
// provider reported.
func (r *Runtime) GetPods(ctx context.Context, _ bool) ([]*runtime.Pod, error) {
	if err := r.seed(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepLocked()
	out := make([]*runtime.Pod, 0, len(r.pods))
	for _, rec := range r.pods {
		if !rec.known || rec.gone {
			continue
		}
		p := &runtime.Pod{ID: rec.uid, Name: rec.name, Namespace: rec.ns,
			Sandboxes: []*runtime.Container{{ID: runtime.ContainerID{Type: r.cfg.Type, ID: string(rec.uid)}, State: runtime.ContainerStateRunning}}}
		if rec.rs != nil {
			p.Containers = make([]*runtime.Container, len(rec.rs.ContainerStatuses))
			for i, cs := range rec.rs.ContainerStatuses {
				p.Containers[i] = &runtime.Container{ID: cs.ID, Name: cs.Name, Image: cs.Image, ImageID: cs.ImageID, State: cs.State}
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// seed asks the provider once for the pods it has.
func (r *Runtime) seed(ctx context.Context) error {
	r.mu.Lock()
	done := r.seeded
	r.mu.Unlock()
	if done {
		return nil
	}
	pods, err := r.p.GetPods(ctx)
	if err != nil {
		return fmt.Errorf("provider GetPods: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seeded {
		return nil
	}
	r.seeded = true
	for _, p := range pods {
		if p == nil || p.UID == "" {
			continue
		}
		rec := r.recordLocked(p.UID, p.Namespace, p.Name, true)
		if rec.known {
			continue
		}
		rec.known, rec.pod = true, p
		r.setStatusLocked(rec, p.Status.DeepCopy())
	}
	return nil
}

// tombstoneTTL is how long the status of a pod the provider no longer has
// is kept for the agent to read.
const tombstoneTTL = 5 * time.Minute

func (r *Runtime) sweepLocked() {
	now := r.cfg.Clock.Now()
	for uid, rec := range r.pods {
		if rec.gone && now.Sub(rec.goneAt) > tombstoneTTL {
			delete(r.pods, uid)
			if r.names[key(rec.ns, rec.name)] == uid {
				delete(r.names, key(rec.ns, rec.name))
			}
		}
	}
}

// GetPodStatus returns the provider's latest status of the pod; the first
// time, before any notification or poll, it asks GetPodStatus. A pod the
// provider does not have has a status without containers.
func (r *Runtime) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
	r.mu.Lock()
	rec := r.recordLocked(uid, namespace, name, false)
	if rec != nil && (rec.status != nil || rec.gone || !rec.known) {
		rs := r.snapshotLocked(rec)
		r.mu.Unlock()
		return rs, nil
	}
	if rec != nil {
		name, namespace = rec.name, rec.ns
	}
	r.mu.Unlock()
	empty := &runtime.PodStatus{ID: uid, Name: name, Namespace: namespace, TimeStamp: r.cfg.Clock.Now()}
	if name == "" {
		return empty, nil
	}
	if err := r.refresh(ctx, uid, namespace, name); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.recordLocked(uid, namespace, name, false); rec != nil {
		return r.snapshotLocked(rec), nil
	}
	return empty, nil
}

// snapshotLocked returns rec's runtime status, stamped now.
func (r *Runtime) snapshotLocked(rec *record) *runtime.PodStatus {
	if rec.rs == nil {
		rec.rs = r.runtimeStatus(rec)
	}
	rs := *rec.rs
	rs.TimeStamp = r.cfg.Clock.Now()
	return &rs
}

// refresh asks the provider for the status of ns/name and records it. A
// pod the provider does not have is recorded gone if it was being deleted.
func (r *Runtime) refresh(ctx context.Context, uid types.UID, ns, name string) error {
	st, err := r.p.GetPodStatus(ctx, ns, name)
	switch {
	case isNotFound(err) || (err == nil && st == nil):
		r.mu.Lock()
		defer r.mu.Unlock()
		rec := r.recordLocked(uid, ns, name, false)
		if rec == nil || rec.gone {
			return nil
		}
		if rec.deleting {
			r.goneLocked(rec)
			return nil
		}
		// Created but not (or no longer) there, and never deleted:
		// virtual-kubelet's verdict after a minute.
		if rec.accepted && (rec.status != nil && rec.status.Phase == v1.PodRunning ||
			r.cfg.Clock.Since(rec.createdAt) > time.Minute) {
			r.setStatusLocked(rec, notFoundStatus(rec.status, r.cfg.Clock.Now()))
		}
		return nil
	case err != nil:
		return fmt.Errorf("provider GetPodStatus %s/%s: %w", ns, name, err)
	}
	st = st.DeepCopy()
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.recordLocked(uid, ns, name, uid != "")
	if rec == nil || rec.gone {
		return nil
	}
	rec.known = true
	r.setStatusLocked(rec, st)
	return nil
}

// goneLocked marks rec as no longer on the provider, with a terminal status
// as virtual-kubelet's gives a deleted pod whose provider did not report
// one.
func (r *Runtime) goneLocked(rec *record) {
	rec.gone, rec.goneAt = true, r.cfg.Clock.Now()
	if rec.status == nil || !stopped(rec.status) {
		rec.status = deletedStatus(rec.status, rec.goneAt)
	}
	r.changedLocked(rec)
}

// SyncPod hands the pod to the provider: CreatePod if the provider does not
// have it, UpdatePod if a field virtual-kubelet passes on changed, nothing
// otherwise (or for a pod being deleted: KillPod's). A failure is recorded
// in the pod's status (reason ProviderFailed, phase Pending, or Failed under
// restart policy Never, as virtual-kubelet does), in an event, and in the
// result; it is retried at the next sync once backoff (per pod) allows.
func (r *Runtime) SyncPod(ctx context.Context, pod *v1.Pod, _ *runtime.PodStatus, _ []v1.Secret, backoff *runtime.Backoff) runtime.PodSyncResult {
	var res runtime.PodSyncResult
	if pod.DeletionTimestamp != nil {
		return res
	}
	r.mu.Lock()
	rec := r.recordLocked(pod.UID, pod.Namespace, pod.Name, true)
	same := rec.accepted && podsEqual(rec.pod, pod)
	r.mu.Unlock()
	if same {
		return res
	}
	bkey := "provider_" + string(pod.UID)
	step := res.NewStep(runtime.CreatePodSandbox, string(pod.UID))
	if err := r.awaitNotifier(ctx); err != nil {
		step.Fail(fmt.Errorf("%w: %w", runtime.ErrCreatePodSandbox, err), "the provider's NotifyPods is not registered yet")
		return res
	}
	if backoff != nil && backoff.IsInBackOffSinceUpdate(bkey, r.cfg.Clock.Now()) {
		step.Fail(fmt.Errorf("%w: provider back-off %s", runtime.ErrCreatePodSandbox, backoff.Get(bkey)),
			fmt.Sprintf("back-off %s before the provider is asked again", backoff.Get(bkey)))
		return res
	}

	cp := pod.DeepCopy()
	var err error
	var okReason, failReason, verb string
	// As virtual-kubelet: a pod the provider returns is updated, whatever
	// the error (providers differ in what they return for "not found").
	if existing, _ := r.p.GetPod(ctx, pod.Namespace, pod.Name); existing != nil {
		okReason, failReason, verb = ReasonUpdateSuccess, ReasonUpdateFailed, "Update"
		if !podsEqual(existing, cp) {
			err = r.p.UpdatePod(ctx, cp)
		}
	} else {
		okReason, failReason, verb = ReasonCreateSuccess, ReasonCreateFailed, "Create"
		err = r.p.CreatePod(ctx, cp)
	}
	if err != nil {
		if backoff != nil {
			backoff.Next(bkey, r.cfg.Clock.Now())
		}
		r.event(pod, v1.EventTypeWarning, failReason, err.Error())
		r.mu.Lock()
		r.setStatusLocked(rec, failedStatus(pod, err))
		r.mu.Unlock()
		step.Fail(fmt.Errorf("%w: provider %sPod: %w", runtime.ErrCreatePodSandbox, verb, err), err.Error())
		return res
	}
	if backoff != nil {
		backoff.Reset(bkey)
	}
	r.event(pod, v1.EventTypeNormal, okReason, "%s pod in provider successfully", verb)
	r.mu.Lock()
	rec.pod, rec.accepted, rec.known = pod, true, true
	needStatus := r.notifier == nil || rec.status == nil
	r.mu.Unlock()
	if needStatus && r.notifier == nil {
		// Polled: take the status now rather than at the next poll.
		if err := r.refresh(ctx, pod.UID, pod.Namespace, pod.Name); err != nil {
			r.log.V(1).Info("Cannot read the status of a pod just handed to the provider", "pod", key(pod.Namespace, pod.Name), "err", err)
		}
	}
	return res
}

// awaitNotifier waits, for a PodNotifier, until its NotifyPods was called:
// a provider may call its callback from CreatePod without a nil check
// (virtual-kubelet's mock does). The agent opens the event stream, which
// registers it, when it starts.
func (r *Runtime) awaitNotifier(ctx context.Context) error {
	if r.notifier == nil {
		return nil
	}
	select {
	case <-r.notifying:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the provider's NotifyPods to be registered: %w", ctx.Err())
	}
}

// KillPod asks the provider to delete the pod (DeletePod, with
// DeletionGracePeriodSeconds set to the effective grace period) and waits,
// within that grace period, until the provider reports it stopped (every
// container terminated, or a terminal phase) or no longer has it. It fails
// if the provider refuses or does not confirm in time; the pod worker asks
// again. A pod the provider reports finished whose API object is not being
// deleted is left to the provider, as virtual-kubelet leaves it until the
// pod is deleted.
func (r *Runtime) KillPod(ctx context.Context, pod *v1.Pod, rp runtime.Pod, gracePeriodOverride *int64) error {
	grace := runtime.EffectiveGracePeriod(pod, gracePeriodOverride)
	uid, ns, name := rp.ID, rp.Namespace, rp.Name
	if pod != nil {
		uid, ns, name = pod.UID, pod.Namespace, pod.Name
	}
	if r.notifier == nil && pod != nil && pod.DeletionTimestamp == nil {
		// Polled: whether the pod finished may be newer than the last poll.
		if err := r.refresh(ctx, uid, ns, name); err != nil {
			r.log.V(1).Info("Cannot read the status of a pod to stop", "pod", key(ns, name), "err", err)
		}
	}
	if err := r.awaitNotifier(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	rec := r.recordLocked(uid, ns, name, uid != "")
	var target *v1.Pod
	switch {
	case rec == nil:
	case rec.gone:
		r.mu.Unlock()
		return nil
	case pod != nil && pod.DeletionTimestamp == nil && !rec.deleting && rec.status != nil && terminal(rec.status):
		r.mu.Unlock()
		return nil
	case pod != nil:
		target = pod.DeepCopy()
	case rec.pod != nil:
		target = rec.pod.DeepCopy()
	}
	r.mu.Unlock()
	if target == nil {
		p, err := r.p.GetPod(ctx, ns, name)
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("%w: provider GetPod %s/%s: %w", runtime.ErrKillContainer, ns, name, err)
		}
		if p == nil {
			if rec != nil {
				r.mu.Lock()
				r.goneLocked(rec)
				r.mu.Unlock()
			}
			return nil
		}
		target = p.DeepCopy()
	}
	if target.DeletionTimestamp == nil {
		now := metav1.NewTime(r.cfg.Clock.Now())
		target.DeletionTimestamp = &now
	}
	target.DeletionGracePeriodSeconds = &grace

	err := r.p.DeletePod(ctx, target)
	switch {
	case isNotFound(err):
		if rec != nil {
			r.mu.Lock()
			r.goneLocked(rec)
			r.mu.Unlock()
		}
		return nil
	case err != nil:
		r.event(target, v1.EventTypeWarning, ReasonDeleteFailed, err.Error())
		return fmt.Errorf("%w: provider DeletePod %s/%s: %w", runtime.ErrKillContainer, ns, name, err)
	}
	r.event(target, v1.EventTypeNormal, ReasonDeleteSuccess, "Delete pod in provider successfully")
	if rec == nil {
		return nil
	}
	r.mu.Lock()
	rec.deleting = true
	r.mu.Unlock()
	return r.awaitStopped(ctx, rec, time.Duration(grace)*time.Second)
}

// awaitStopped waits until rec is stopped or gone, asking the provider
// every DeleteCheckPeriod, for at most grace.
func (r *Runtime) awaitStopped(ctx context.Context, rec *record, grace time.Duration) error {
	deadline := r.cfg.Clock.Now().Add(grace)
	for {
		if err := r.refresh(ctx, rec.uid, rec.ns, rec.name); err != nil {
			r.log.V(1).Info("Cannot read the status of a pod being deleted", "pod", key(rec.ns, rec.name), "err", err)
		}
		r.mu.Lock()
		done := rec.gone || (rec.status != nil && stopped(rec.status))
		changed := rec.changed
		r.mu.Unlock()
		if done {
			return nil
		}
		left := deadline.Sub(r.cfg.Clock.Now())
		if left <= 0 {
			return fmt.Errorf("%w: the provider did not stop pod %s within its grace period of %v", runtime.ErrKillContainer, key(rec.ns, rec.name), grace)
		}
		t := r.cfg.Clock.NewTimer(min(left, r.cfg.DeleteCheckPeriod))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-changed:
			t.Stop()
		case <-t.C():
		}
	}
}

func (r *Runtime) event(pod *v1.Pod, typ, reason, format string, args ...any) {
	if r.cfg.Recorder == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			r.log.Error(fmt.Errorf("panic: %v", p), "Event recorder panicked", "reason", reason)
		}
	}()
	r.cfg.Recorder.Eventf(pod, typ, reason, format, args...)
}

// isNotFound reports whether err says the provider does not have the pod:
// virtual-kubelet's errdefs.IsNotFound (a NotFound() bool method, also
// behind Cause or Unwrap) or runtime.ErrNotFound.
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, runtime.ErrNotFound) {
		return true
	}
	for e := err; e != nil; {
		if nf, ok := e.(interface{ NotFound() bool }); ok {
			return nf.NotFound()
		}
		if c, ok := e.(interface{ Cause() error }); ok {
			e = c.Cause()
			continue
		}
		e = errors.Unwrap(e)
	}
	return false
}

// podsEqual compares the fields a pod may change after creation that
// virtual-kubelet passes on with UpdatePod.
func podsEqual(a, b *v1.Pod) bool {
	if a == nil || b == nil {
		return a == b
	}
	eq := apiequality.Semantic.DeepEqual
	return eq(a.Spec.Containers, b.Spec.Containers) &&
		eq(a.Spec.InitContainers, b.Spec.InitContainers) &&
		eq(a.Spec.EphemeralContainers, b.Spec.EphemeralContainers) &&
		eq(a.Spec.ActiveDeadlineSeconds, b.Spec.ActiveDeadlineSeconds) &&
		eq(a.Spec.Tolerations, b.Spec.Tolerations) &&
		eq(a.Labels, b.Labels) &&
		eq(a.Annotations, b.Annotations)
}
