package status

import (
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podutil"
)

// ReconcileAPIPod compares pod, as the apiserver has it now (a watch's
// update), with the status the Manager last sent for it, and sends that
// status again if another writer changed what the agent owns: its phase
// or one of its conditions. The node lifecycle controller sets Ready False
// on every pod of a node whose Lease it saw expire; once the node is back,
// the kubelet's periodic reconcile (needsReconcile: "pod status is
// inconsistent with cached status") puts Ready back, and so does this. An
// update older than the apiserver's answer to the Manager's last patch,
// a pod whose status is not sent yet, and terminal, finished, static
// and mirror pods are left alone. The agent calls it for each pod whose
// status alone changed (a RECONCILE).
func (m *Manager) ReconcileAPIPod(pod *v1.Pod) {
	if m.client == nil || pod == nil || podutil.IsStaticPod(pod) || podutil.IsMirrorPod(pod) {
		return
	}
	uid := pod.UID
	m.mu.Lock()
	defer m.mu.Unlock()
	vs, ok := m.statuses[uid]
	if !ok || vs.finished || isTerminalPhase(vs.status.Phase) || vs.pod.DeletionTimestamp != nil || pod.DeletionTimestamp != nil {
		return
	}
	m.apiMu.Lock()
	due := m.apiVersions[uid] < vs.version
	last := m.apiPods[uid]
	m.apiMu.Unlock()
	if due || (last != nil && notNewer(pod.ResourceVersion, last.ResourceVersion)) || ownedStatusEqual(&pod.Status, &vs.status) {
		return
	}
	// The next patch builds on the apiserver's pod as it is now, not on
	// the answer to the last one, which holds what the other writer
	// replaced.
	m.setAPIPod(uid, pod)
	m.lastVersion++
	m.statuses[uid] = &versionedStatus{version: m.lastVersion, status: vs.status, pod: vs.pod, finished: vs.finished}
	m.enqueue(uid)
}

// notNewer reports whether resource version a is known to be no newer
// than b. Resource versions are opaque; the apiserver's are etcd revisions,
// which compare as numbers, and anything else is taken as newer.
func notNewer(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x <= y
}

// ownedStatusEqual reports whether api has sent's phase and the status of
// each condition the agent owns and sent.
func ownedStatusEqual(api, sent *v1.PodStatus) bool {
	if api.Phase != sent.Phase {
		return false
	}
	for i := range sent.Conditions {
		c := &sent.Conditions[i]
		if !ownedByAgent(c.Type) {
			continue
		}
		if _, ac := findCondition(api.Conditions, c.Type); ac == nil || ac.Status != c.Status {
			return false
		}
	}
	return true
}
