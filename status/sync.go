package status

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podutil"
)

// errNotOurs: the static pod's name is taken by a pod that is no mirror.
var errNotOurs = errors.New("a pod that is not a mirror pod has the static pod's name")

// syncBatch is the periodic reconcile: it sends the statuses the apiserver
// does not have, retries the deletion of finished pods, checks static
// pods' mirrors, deletes orphaned mirror pods and forgets versions of pods
// that are gone. Pods a sync worker is syncing are left to it. It returns
// how many pods it synced.
func (m *Manager) syncBatch(ctx context.Context) int {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()

	var todo []types.UID
	m.mu.Lock()
	m.apiMu.Lock()
	orphans := m.orphans
	m.orphans = nil
	for uid := range m.apiVersions {
		if _, ok := m.statuses[uid]; ok {
			continue
		}
		if _, ok := m.statics[uid]; ok {
			continue
		}
		delete(m.apiVersions, uid)
	}
	for uid := range m.apiPods {
		if _, ok := m.statuses[uid]; !ok {
			delete(m.apiPods, uid)
		}
	}
	for uid, vs := range m.statuses {
		if m.needsReconcileLocked(uid, vs) {
			todo = append(todo, uid)
		}
	}
	m.apiMu.Unlock()
	m.mu.Unlock()

	for _, o := range orphans {
		m.deleteOrphan(ctx, o)
	}
	m.syncAll(ctx, todo)
	return len(todo)
}

// needsReconcileLocked reports whether the periodic reconcile syncs uid.
// Callers hold mu and apiMu.
func (m *Manager) needsReconcileLocked(uid types.UID, vs *versionedStatus) bool {
	apiUID := uid
	if mr, ok := m.mirrors[uid]; ok {
		apiUID = mr.uid
	}
	switch {
	case m.apiVersions[apiUID] < vs.version:
	case vs.finished && vs.pod.DeletionTimestamp != nil && !podutil.IsStaticPod(vs.pod):
		// Deletion may have waited for containers to stop.
	case !vs.finished && podutil.IsStaticPod(vs.pod) && m.mirrors[uid].uid != "":
		// Static pods are few: check that their mirror is still there.
		// One without a mirror (none wanted) is skipped, as the
		// kubelet's needsReconcile does, rather than read as NotFound.
	default:
		return false
	}
	return true
}

// syncAll syncs todo's pods, SyncWorkers at a time (each pod's sync is a
// round trip or two to the apiserver), each with its latest status; a pod
// a sync worker has is skipped.
func (m *Manager) syncAll(ctx context.Context, todo []types.UID) {
	workers := min(m.syncWorkers, len(todo))
	if workers <= 1 {
		for _, uid := range todo {
			if ctx.Err() != nil {
				return
			}
			m.syncClaimed(ctx, uid)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(todo) || ctx.Err() != nil {
					return
				}
				m.syncClaimed(ctx, todo[i])
			}
		}()
	}
	wg.Wait()
}

// syncClaimed syncs uid's latest status unless a sync worker has the pod
// or, since the batch listed it, has synced it.
func (m *Manager) syncClaimed(ctx context.Context, uid types.UID) {
	if !m.tryClaim(uid) {
		return
	}
	defer m.release(uid)
	m.mu.Lock()
	m.apiMu.Lock()
	vs, ok := m.statuses[uid]
	ok = ok && m.needsReconcileLocked(uid, vs)
	m.apiMu.Unlock()
	m.mu.Unlock()
	if ok {
		m.syncPod(ctx, uid, vs)
	}
}

// syncPod syncs one status, retrying conflicts with back-off. A panic in
// the injected client or deletion safety is logged, not propagated: the
// status is retried at the next reconcile.
func (m *Manager) syncPod(ctx context.Context, uid types.UID, vs *versionedStatus) {
	defer func() {
		if r := recover(); r != nil {
			m.log.Error(fmt.Errorf("panic: %v", r), "Syncing pod status panicked", "pod", podRef(vs.pod), "podUID", uid)
		}
	}()
	for attempt := 0; ; attempt++ {
		err := m.syncPodOnce(ctx, uid, vs, false)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || attempt >= m.conflictRetries {
			m.log.Info("Failed to sync pod status", "pod", podRef(vs.pod), "podUID", uid, "err", err)
			return
		}
		m.log.V(3).Info("Conflict syncing pod status; retrying", "pod", podRef(vs.pod), "attempt", attempt+1)
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(conflictBackoff << attempt):
		}
	}
}

// syncPodOnce sends vs; read makes it read the pod first rather than patch
// against a copy it knows.
func (m *Manager) syncPodOnce(ctx context.Context, uid types.UID, vs *versionedStatus, read bool) error {
	pod := vs.pod
	client := m.client(pod.Namespace)
	static := podutil.IsStaticPod(pod)

	var api *v1.Pod
	known := false
	if !read {
		api, known = m.knownAPIPod(uid, vs)
	}
	var err error
	if !known {
		api, err = client.Get(ctx, pod.Name, metav1.GetOptions{})
	}
	switch {
	case known:
	case apierrors.IsNotFound(err):
		if !static {
			// Its status is dropped by RemoveOrphanedStatuses.
			m.log.V(3).Info("Pod does not exist on the server", "pod", podRef(pod), "podUID", uid)
			// Until its status is dropped, a later change reads again
			// rather than patching the source's copy of the pod.
			m.setAPIPod(uid, &v1.Pod{})
			return nil
		}
		if api, err = m.createMirror(ctx, client, vs); err != nil {
			return err
		}
		if api == nil {
			// No mirror is wanted: nothing to send until the next change.
			m.acknowledge(uid, vs.version)
			return nil
		}
	case err != nil:
		return err
	}

	if static {
		if api.DeletionTimestamp != nil || !isMirrorOf(api, pod) {
			if !podutil.IsMirrorPod(api) {
				return fmt.Errorf("%s: %w", podRef(pod), errNotOurs)
			}
			m.log.V(2).Info("Deleting outdated mirror pod", "pod", podRef(pod), "mirrorUID", api.UID)
			if err := m.deletePod(ctx, client, api.Name, api.UID); err != nil {
				return err
			}
			if api, err = m.createMirror(ctx, client, vs); api == nil || err != nil {
				return err
			}
		}
		m.setMirror(uid, api)
	} else if api.UID != uid {
		m.log.V(2).Info("Pod was deleted and recreated; status update dropped", "pod", podRef(pod), "oldUID", uid, "uid", api.UID)
		m.mu.Lock()
		if m.statuses[uid] == vs {
			m.deleteLocked(uid, false)
		}
		m.mu.Unlock()
		return nil
	}

	delay := m.safety != nil && m.safety.PodCouldHaveRunningContainers(pod)
	merged := mergePodStatus(&api.Status, &vs.status, delay, metav1.NewTime(m.clock.Now()).Rfc3339Copy())
	if changes := statusChanges(&api.Status, &merged); changes != nil {
		var np *v1.Pod
		var err error
		if up, ok := client.(StatusUpdater); ok && known && m.updateKnown {
			// The patch's result, sent whole on the copy it builds on.
			m.log.V(3).Info("Updating pod status", "pod", podRef(pod), "version", vs.version, "resourceVersion", api.ResourceVersion)
			st := updatedStatus(&api.Status, &merged)
			np, err = up.UpdateStatus(ctx, updateBody(api, st), metav1.UpdateOptions{})
		} else {
			patch, perr := marshalPatch(api.UID, changes)
			if perr != nil {
				return perr
			}
			m.log.V(3).Info("Patching pod status", "pod", podRef(pod), "version", vs.version, "patch", string(patch))
			np, err = client.Patch(ctx, api.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		}
		if err != nil {
			// The next attempt reads the pod: it may be gone, recreated
			// (the patch's UID precondition answers Conflict) or changed
			// (the update's resourceVersion answers Conflict).
			m.setAPIPod(uid, nil)
			if known && (apierrors.IsNotFound(err) || apierrors.IsConflict(err)) {
				// Read the pod now: the source's copy (knownAPIPod) is
				// what the apiserver just refused, and patching it again
				// looped on a deleted pod (11,000 patches answered 404
				// in 7 minutes, one status worker held).
				return m.syncPodOnce(ctx, uid, vs, true)
			}
			return err
		}
		api = np
	}
	if !static {
		m.setAPIPod(uid, api)
	}
	// A held-back terminal phase is not acknowledged, so that the periodic
	// reconcile sends it once the containers are gone.
	if !(isTerminalPhase(vs.status.Phase) && !isTerminalPhase(api.Status.Phase)) {
		m.acknowledge(api.UID, vs.version)
	}

	if m.canBeDeleted(api, vs, delay) {
		m.setAPIPod(uid, nil)
		if err := m.deletePod(ctx, client, api.Name, api.UID); err != nil {
			return err
		}
		m.log.V(3).Info("Pod fully terminated and removed from the apiserver", "pod", podRef(pod))
		m.mu.Lock()
		if m.statuses[uid] == vs {
			m.deleteLocked(uid, false)
		}
		m.mu.Unlock()
	}
	return nil
}

// knownAPIPod returns the apiserver's pod as the next patch of uid may
// build on it without reading the pod: the answer to the pod's last status
// patch or, before its first, the pod as the apiserver delivered it (it has
// a resourceVersion). The upstream kubelet reads the pod before every
// patch; a running pod's patch needs no read. The patch carries the pod's
// UID as a precondition (a recreated pod answers Conflict, a deleted one
// NotFound, and the next attempt reads), it is a strategic merge that
// leaves alone the conditions other writers own, and the kubelet is the
// only writer of the rest of the status. A read stays where the
// apiserver's current pod decides something: static pods (their mirror
// pod), and terminal or deleted pods (the held-back phase and the deletion
// look at the apiserver's phase and deletionTimestamp).
func (m *Manager) knownAPIPod(uid types.UID, vs *versionedStatus) (*v1.Pod, bool) {
	if vs.finished || isTerminalPhase(vs.status.Phase) || vs.pod.DeletionTimestamp != nil || podutil.IsStaticPod(vs.pod) {
		return nil, false
	}
	m.apiMu.Lock()
	api, ok := m.apiPods[uid]
	m.apiMu.Unlock()
	switch {
	case !ok && vs.pod.ResourceVersion != "" && vs.pod.UID == uid:
		return vs.pod, true
	case !ok || api.UID != uid || api.DeletionTimestamp != nil:
		return nil, false
	}
	return api, true
}

// setAPIPod records the apiserver's pod after a patch; nil forgets it.
// Only what a later patch builds on is kept (see apiPodOf).
func (m *Manager) setAPIPod(uid types.UID, api *v1.Pod) {
	m.apiMu.Lock()
	defer m.apiMu.Unlock()
	if api == nil {
		delete(m.apiPods, uid)
	} else {
		m.apiPods[uid] = apiPodOf(api)
	}
}

// apiPodOf is the part of the apiserver's pod that knownAPIPod's callers
// read: its metadata and status. An update of pods/status takes every
// metadata field but ownerReferences and deletionTimestamp from its body
// (labels, annotations, finalizers: dropped here, the next update would
// clear them, a Job pod's tracking finalizer among them). A patch's answer
// is the whole pod, spec and managedFields included, and kept whole it was
// one more full copy of every running pod beside the source's and the pod
// manager's (some 5 KiB a pod): spec and managedFields are left out. The
// metadata's maps and slices are shared, never written.
func apiPodOf(p *v1.Pod) *v1.Pod {
	meta := p.ObjectMeta
	meta.ManagedFields = nil
	return &v1.Pod{
		ObjectMeta: meta,
		Status:     *p.Status.DeepCopy(), // p may be the source's, read elsewhere
	}
}

// acknowledge records that the apiserver has version of the status of the
// pod with uid there.
func (m *Manager) acknowledge(uid types.UID, version uint64) {
	m.apiMu.Lock()
	defer m.apiMu.Unlock()
	// A sync of an older version that ended last must not undo a newer
	// one's acknowledgement.
	if version > m.apiVersions[uid] {
		m.apiVersions[uid] = version
	}
}

// canBeDeleted: the pod is being deleted, the apiserver shows it terminal,
// the agent has finished it and no container can run any more. Mirror pods
// are deleted only with their static pod.
func (m *Manager) canBeDeleted(api *v1.Pod, vs *versionedStatus, couldRun bool) bool {
	return api.DeletionTimestamp != nil && !podutil.IsMirrorPod(api) &&
		isTerminalPhase(api.Status.Phase) && vs.finished && !couldRun
}

// deletePod deletes a pod at once, only if it still has uid. A pod already
// gone is fine.
func (m *Manager) deletePod(ctx context.Context, client PodClient, name string, uid types.UID) error {
	grace := int64(0)
	err := client.Delete(ctx, name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      metav1.NewUIDPreconditions(string(uid)),
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// isMirrorOf reports whether mirror mirrors the static pod's current
// content.
func isMirrorOf(mirror, static *v1.Pod) bool {
	hash, ok := mirror.Annotations[podutil.ConfigMirrorAnnotationKey]
	return ok && mirror.Name == static.Name && mirror.Namespace == static.Namespace &&
		hash == static.Annotations[podutil.ConfigHashAnnotationKey]
}

// createMirror creates the mirror pod of a static pod: a copy carrying the
// config.mirror annotation (the static pod's hash) and, if the Node can be
// read, an owner reference to it. It returns nil, nil when no mirror is
// wanted (no node name, or the pod is finished).
func (m *Manager) createMirror(ctx context.Context, client PodClient, vs *versionedStatus) (*v1.Pod, error) {
	if m.nodeName == "" || vs.finished {
		return nil, nil
	}
	pod := vs.pod
	mp := &v1.Pod{ObjectMeta: *pod.ObjectMeta.DeepCopy(), Spec: *pod.Spec.DeepCopy()}
	mp.UID, mp.ResourceVersion, mp.Generation = "", "", 0
	mp.Annotations = maps.Clone(pod.Annotations)
	if mp.Annotations == nil {
		mp.Annotations = map[string]string{}
	}
	mp.Annotations[podutil.ConfigMirrorAnnotationKey] = pod.Annotations[podutil.ConfigHashAnnotationKey]
	if mp.Spec.NodeName == "" {
		mp.Spec.NodeName = m.nodeName
	}
	if m.nodes != nil {
		nodeUID, err := m.getNodeUID(ctx)
		if err != nil {
			return nil, err
		}
		controller := true
		mp.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: m.nodeName, UID: nodeUID, Controller: &controller,
		}}
	}
	created, err := client.Create(ctx, mp, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Someone was faster; the caller checks what is there.
		return client.Get(ctx, pod.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	m.log.V(2).Info("Created mirror pod", "pod", podRef(pod), "mirrorUID", created.UID)
	return created, nil
}

func (m *Manager) getNodeUID(ctx context.Context) (types.UID, error) {
	m.apiMu.Lock()
	known := m.nodeUID
	m.apiMu.Unlock()
	if known != "" {
		return known, nil
	}
	node, err := m.nodes.Get(ctx, m.nodeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading node %q for the mirror pod's owner: %w", m.nodeName, err)
	}
	if node.UID == "" {
		return "", fmt.Errorf("node %q has no UID", m.nodeName)
	}
	m.apiMu.Lock()
	m.nodeUID = node.UID
	m.apiMu.Unlock()
	return node.UID, nil
}

// setMirror records the mirror pod of a static pod.
func (m *Manager) setMirror(uid types.UID, mirror *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.statuses[uid]; !ok {
		return
	}
	if old, ok := m.mirrors[uid]; ok {
		if old.uid == mirror.UID {
			return
		}
		delete(m.statics, old.uid)
	}
	m.mirrors[uid] = mirrorRef{namespace: mirror.Namespace, name: mirror.Name, uid: mirror.UID}
	m.statics[mirror.UID] = uid
}

// deleteOrphan deletes a mirror pod whose static pod is gone. Failures are
// logged; the mirror's UID precondition keeps a retry from hitting a newer
// mirror.
func (m *Manager) deleteOrphan(ctx context.Context, o mirrorRef) {
	defer func() {
		if r := recover(); r != nil {
			m.log.Error(fmt.Errorf("panic: %v", r), "Deleting an orphaned mirror pod panicked", "pod", o.namespace+"/"+o.name)
		}
	}()
	if err := m.deletePod(ctx, m.client(o.namespace), o.name, o.uid); err != nil && !apierrors.IsConflict(err) {
		m.log.Info("Failed to delete orphaned mirror pod", "pod", o.namespace+"/"+o.name, "err", err)
	}
}
