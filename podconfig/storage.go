package podconfig

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/safeevent"
	"github.com/nodekit/nodekit/podutil"
)

// entry is one stored pod and, once it has been compared with a newer
// version, its fingerprints. A new pod is stored without them: nothing
// compares it until its source sends it again, so a first SET costs no
// encoding (the kubelet's costs a deep copy of every pod). They are taken
// then from the stored pod, which has gone out to the consumer: encoding
// it only reads it, because warmQuantities filled its quantities' string
// caches before it went out.
type entry struct {
	pod      *v1.Pod
	semantic uint64
	status   uint64
	hashed   bool   // semantic and status are set
	mark     uint64 // the SET generation that last saw the pod
}

type nameKey struct{ name, namespace string }

// changes are the stored pods an update touched, by resulting operation.
type changes struct {
	adds, updates, deletes, removes, reconciles []*v1.Pod
}

func (c *changes) reset() {
	clear(c.adds)
	clear(c.updates)
	clear(c.deletes)
	clear(c.removes)
	clear(c.reconciles)
	c.adds, c.updates, c.deletes, c.removes, c.reconciles = c.adds[:0], c.updates[:0], c.deletes[:0], c.removes[:0], c.reconciles[:0]
}

// podStorage is the in-memory truth of every source's pods. Merges are
// serialized by sem, which also orders deliveries on the output channel; sem
// is a channel so that a caller waiting for it can give up with its context.
type podStorage struct {
	sem     chan struct{}
	mode    NotificationMode
	updates chan<- PodUpdate
	log     logr.Logger
	clock   clock.PassiveClock
	rec     EventRecorder
	copy    bool

	// Guarded by sem.
	pods  map[string]map[types.UID]entry
	fp    *fingerprinter
	names map[nameKey]struct{}
	// noUID holds, per source, the pods without a UID that were reported
	// (by name), with the SET generation that last had them, so that each
	// is reported once while its source keeps sending it.
	noUID map[string]map[nameKey]uint64
	gen   uint64
	ch    changes

	seenMu sync.RWMutex
	seen   map[string]struct{} // sources that sent at least one SET
}

func newPodStorage(updates chan<- PodUpdate, mode NotificationMode, o Options) *podStorage {
	return &podStorage{
		sem:     make(chan struct{}, 1),
		mode:    mode,
		updates: updates,
		log:     o.Log,
		clock:   o.Clock,
		rec:     o.Recorder,
		copy:    o.CopyPods,
		pods:    map[string]map[types.UID]entry{},
		fp:      newFingerprinter(),
		names:   map[nameKey]struct{}{},
		noUID:   map[string]map[nameKey]uint64{},
		seen:    map[string]struct{}{},
	}
}

func (s *podStorage) lock(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *podStorage) unlock() { <-s.sem }

// Merge folds one update of source into the storage and delivers the
// resulting notifications, in order. It returns early with ctx's error if
// ctx ends while it waits for its turn or for the consumer.
func (s *podStorage) Merge(ctx context.Context, source string, u PodUpdate) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()

	seenBefore := s.hasSeen(source)
	s.merge(source, u)
	firstSet := !seenBefore && u.Op == SET
	c := &s.ch

	switch s.mode {
	case Incremental:
		if err := s.send(ctx, REMOVE, source, c.removes); err != nil {
			return err
		}
		if err := s.send(ctx, ADD, source, c.adds); err != nil {
			return err
		}
		if err := s.send(ctx, UPDATE, source, c.updates); err != nil {
			return err
		}
		if err := s.send(ctx, DELETE, source, c.deletes); err != nil {
			return err
		}
		if firstSet && len(c.adds) == 0 && len(c.updates) == 0 && len(c.deletes) == 0 {
			// An empty ADD tells the consumer that the source has reported in.
			if err := s.deliver(ctx, PodUpdate{Pods: []*v1.Pod{}, Op: ADD, Source: source}); err != nil {
				return err
			}
		}
		return s.send(ctx, RECONCILE, source, c.reconciles)
	case SnapshotAndUpdates:
		if len(c.removes) > 0 || len(c.adds) > 0 || firstSet {
			if err := s.deliver(ctx, PodUpdate{Pods: s.mergedState(), Op: SET, Source: source}); err != nil {
				return err
			}
		}
		if err := s.send(ctx, UPDATE, source, c.updates); err != nil {
			return err
		}
		return s.send(ctx, DELETE, source, c.deletes)
	case Snapshot:
		if len(c.updates) > 0 || len(c.deletes) > 0 || len(c.adds) > 0 || len(c.removes) > 0 || firstSet {
			return s.deliver(ctx, PodUpdate{Pods: s.mergedState(), Op: SET, Source: source})
		}
	}
	return nil
}

// send delivers pods as one update, if there are any: the stored pods
// themselves, or deep copies with Options.CopyPods.
func (s *podStorage) send(ctx context.Context, op PodOperation, source string, pods []*v1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		out[i] = s.out(p)
	}
	return s.deliver(ctx, PodUpdate{Pods: out, Op: op, Source: source})
}

// out is what the consumer gets of a stored pod. Sharing is safe because the
// storage never modifies a pod once stored: an update stores the new object.
func (s *podStorage) out(p *v1.Pod) *v1.Pod {
	if s.copy {
		return p.DeepCopy()
	}
	return p
}

func (s *podStorage) deliver(ctx context.Context, u PodUpdate) error {
	select {
	case s.updates <- u:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *podStorage) merge(source string, u PodUpdate) {
	s.ch.reset()
	pods := s.pods[source]
	if pods == nil {
		pods = map[types.UID]entry{}
		s.pods[source] = pods
	}
	switch u.Op {
	case ADD, UPDATE, DELETE:
		s.log.V(4).Info("Merging pods from source", "op", u.Op, "source", source, "count", len(u.Pods))
		s.apply(source, u.Pods, pods, 0)
	case REMOVE:
		s.log.V(4).Info("Removing pods from source", "source", source, "count", len(u.Pods))
		for _, p := range u.Pods {
			if p == nil {
				continue
			}
			if p.UID == "" {
				delete(s.noUID[source], nameKey{p.Name, p.Namespace})
				continue
			}
			if e, ok := pods[p.UID]; ok {
				delete(pods, p.UID)
				s.ch.removes = append(s.ch.removes, e.pod)
			}
		}
	case SET:
		s.log.V(4).Info("Setting pods for source", "source", source, "count", len(u.Pods))
		s.markSeen(source)
		s.gen++
		s.apply(source, u.Pods, pods, s.gen)
		for uid, e := range pods {
			if e.mark != s.gen {
				delete(pods, uid)
				s.ch.removes = append(s.ch.removes, e.pod)
			}
		}
		for k, mark := range s.noUID[source] {
			if mark != s.gen {
				delete(s.noUID[source], k)
			}
		}
	default:
		s.log.Info("Ignoring update of unknown type", "op", u.Op, "source", source)
	}
}

// apply merges incoming pods into the source's pods and records what
// changed. mark is the SET generation, or 0 for ADD/UPDATE/DELETE.
func (s *podStorage) apply(source string, incoming []*v1.Pod, pods map[types.UID]entry, mark uint64) {
	checkNames := len(incoming) > 1
	if checkNames {
		clear(s.names)
	}
	var seenAt string
	for i, ref := range incoming {
		if ref == nil {
			s.log.Info("Ignoring nil pod", "source", source, "index", i)
			continue
		}
		if ref.UID == "" {
			s.rejectNoUID(source, ref, mark)
			continue
		}
		if checkNames {
			k := nameKey{ref.Name, ref.Namespace}
			if _, dup := s.names[k]; dup {
				s.log.Info("Pod failed validation due to duplicate pod name, ignoring", "index", i, "pod", klogRef(ref), "source", source)
				if err := safeevent.Eventf(s.rec, ref, v1.EventTypeWarning, ReasonFailedValidation,
					"Error validating pod %s from %s due to duplicate pod name %q, ignoring", formatPod(ref), source, ref.Name); err != nil {
					s.log.Error(err, "Recording event")
				}
				continue
			}
			s.names[k] = struct{}{}
		}

		e, found := pods[ref.UID]
		if !found {
			if seenAt == "" {
				seenAt = s.clock.Now().Format(time.RFC3339Nano)
			}
			if ref.Annotations == nil {
				ref.Annotations = make(map[string]string, 2)
			}
			ref.Annotations[podutil.ConfigSourceAnnotationKey] = source
			ref.Annotations[podutil.ConfigFirstSeenAnnotationKey] = seenAt
			warmQuantities(ref)
			pods[ref.UID] = entry{pod: ref, mark: mark}
			s.ch.adds = append(s.ch.adds, ref)
			continue
		}
		e.mark = mark
		if ref == e.pod {
			// The stored object itself: unchanged, by the ownership contract.
			pods[ref.UID] = e
			continue
		}
		if !e.hashed {
			e.semantic, e.status, e.hashed = s.fp.semantic(e.pod), s.fp.status(e.pod), true
		}
		sem, st := s.fp.semantic(ref), s.fp.status(ref)
		if sem == e.semantic {
			// Not an update; only a changed status makes it a reconcile.
			if st != e.status {
				adopt(source, ref, e.pod)
				e.pod, e.status = ref, st
				s.ch.reconciles = append(s.ch.reconciles, ref)
			}
			pods[ref.UID] = e
			continue
		}
		adopt(source, ref, e.pod)
		e.pod, e.semantic, e.status = ref, sem, st
		pods[ref.UID] = e
		if ref.DeletionTimestamp != nil {
			s.ch.deletes = append(s.ch.deletes, ref) // graceful deletion
		} else {
			s.ch.updates = append(s.ch.updates, ref)
		}
	}
}

// rejectNoUID drops a pod without a UID (one from client-go's fake
// clientset, say): the agent keys every pod by UID. It is reported once, by
// an error log and a Warning event, while its source keeps sending it.
func (s *podStorage) rejectNoUID(source string, ref *v1.Pod, mark uint64) {
	seen := s.noUID[source]
	if seen == nil {
		seen = map[nameKey]uint64{}
		s.noUID[source] = seen
	}
	k := nameKey{ref.Name, ref.Namespace}
	if _, reported := seen[k]; !reported {
		s.log.Error(nil, "Pod has no UID, ignoring it", "pod", klogRef(ref), "source", source)
		if err := safeevent.Eventf(s.rec, ref, v1.EventTypeWarning, ReasonFailedValidation,
			"Error validating pod %s from %s: metadata.uid is empty, ignoring", podutil.FullName(ref), source); err != nil {
			s.log.Error(err, "Recording event")
		}
	}
	seen[k] = mark
}

// adopt makes ref the stored version of existing: it carries over the
// agent's own annotations (config.seen and friends), as the kubelet does.
// Storing the newest object (rather than patching fields into the old one)
// keeps metadata such as resourceVersion current.
func adopt(source string, ref, existing *v1.Pod) {
	if ref == existing {
		return
	}
	if ref.Annotations == nil {
		ref.Annotations = make(map[string]string, 2)
	}
	ref.Annotations[podutil.ConfigSourceAnnotationKey] = source
	for _, k := range [...]string{podutil.ConfigSourceAnnotationKey, podutil.ConfigMirrorAnnotationKey, podutil.ConfigFirstSeenAnnotationKey} {
		if v, ok := existing.Annotations[k]; ok {
			ref.Annotations[k] = v
		}
	}
}

// mergedState returns every stored pod. Called under sem.
func (s *podStorage) mergedState() []*v1.Pod {
	n := 0
	for _, pods := range s.pods {
		n += len(pods)
	}
	out := make([]*v1.Pod, 0, n)
	for _, pods := range s.pods {
		for _, e := range pods {
			out = append(out, s.out(e.pod))
		}
	}
	return out
}

// Sync delivers a SET of every pod from every source.
func (s *podStorage) Sync(ctx context.Context) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	return s.deliver(ctx, PodUpdate{Pods: s.mergedState(), Op: SET, Source: podutil.AllSource})
}

func (s *podStorage) markSeen(source string) {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	s.seen[source] = struct{}{}
}

func (s *podStorage) hasSeen(source string) bool {
	s.seenMu.RLock()
	defer s.seenMu.RUnlock()
	_, ok := s.seen[source]
	return ok
}

func (s *podStorage) seenAll(sources []string) bool {
	s.seenMu.RLock()
	defer s.seenMu.RUnlock()
	for _, src := range sources {
		if _, ok := s.seen[src]; !ok {
			return false
		}
	}
	return true
}

// formatPod is the kubelet's format.Pod: name_namespace(uid).
func formatPod(p *v1.Pod) string {
	return fmt.Sprintf("%s(%s)", podutil.FullName(p), p.UID)
}

// klogRef renders a pod as namespace/name for structured logs.
func klogRef(p *v1.Pod) string {
	if p.Namespace == "" {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}
