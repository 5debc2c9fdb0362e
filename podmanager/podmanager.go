package podmanager

import (
	"slices"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podutil"
)

// Manager is a set of desired pods and mirror pods, safe for concurrent use.
// It keeps the pointers it is given: callers must not modify a pod after
// storing it.
type Manager struct {
	mu     sync.RWMutex
	byUID  map[types.UID]*v1.Pod
	byName map[string]*v1.Pod // full name -> pod (not mirror)
	mirror map[string]*v1.Pod // full name -> mirror pod
	// ordered holds byUID's pods oldest first, kept in order as pods come
	// and go, so that listing them (admission does for every pod it
	// admits) is a copy rather than a sort.
	ordered []*v1.Pod
}

// New returns an empty Manager.
func New() *Manager {
	return &Manager{byUID: map[types.UID]*v1.Pod{}, byName: map[string]*v1.Pod{}, mirror: map[string]*v1.Pod{}}
}

// AddOrUpdate stores pod; a mirror pod goes to the mirror index.
func (m *Manager) AddOrUpdate(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name := podutil.FullName(pod)
	if podutil.IsMirrorPod(pod) {
		m.mirror[name] = pod
		return
	}
	if old, ok := m.byUID[pod.UID]; ok {
		m.unorderLocked(old)
	}
	m.orderLocked(pod)
	m.byUID[pod.UID] = pod
	m.byName[name] = pod
}

// compareAge orders pods as Older does.
func compareAge(a, b *v1.Pod) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	switch {
	case a.UID < b.UID:
		return -1
	case a.UID > b.UID:
		return 1
	}
	return 0
}

// orderLocked inserts pod into ordered; pods mostly come newest last, an
// append.
func (m *Manager) orderLocked(pod *v1.Pod) {
	if n := len(m.ordered); n == 0 || compareAge(m.ordered[n-1], pod) < 0 {
		m.ordered = append(m.ordered, pod)
		return
	}
	i, _ := slices.BinarySearchFunc(m.ordered, pod, compareAge)
	m.ordered = slices.Insert(m.ordered, i, pod)
}

// unorderLocked removes the stored pod from ordered.
func (m *Manager) unorderLocked(pod *v1.Pod) {
	if i, ok := slices.BinarySearchFunc(m.ordered, pod, compareAge); ok {
		m.ordered = slices.Delete(m.ordered, i, i+1)
	}
}

// Remove forgets pod (or mirror pod); a newer pod of the same full name but
// another UID stays.
func (m *Manager) Remove(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name := podutil.FullName(pod)
	if podutil.IsMirrorPod(pod) {
		if cur, ok := m.mirror[name]; ok && cur.UID == pod.UID {
			delete(m.mirror, name)
		}
		return
	}
	if old, ok := m.byUID[pod.UID]; ok {
		m.unorderLocked(old)
		delete(m.byUID, pod.UID)
	}
	if cur, ok := m.byName[name]; ok && cur.UID == pod.UID {
		delete(m.byName, name)
	}
}

// GetPodByUID returns the desired pod (never a mirror) with uid. It
// implements syncloop.PodGetter.
func (m *Manager) GetPodByUID(uid types.UID) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.byUID[uid]
	return p, ok
}

// GetPodByFullName returns the desired pod named name_namespace.
func (m *Manager) GetPodByFullName(fullName string) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.byName[fullName]
	return p, ok
}

// PodAndMirror translates any pod into the pod to run and its mirror: for
// a mirror pod, the static pod of the same full name (nil if unknown) and
// the mirror itself, wasMirror true; for any other pod, the pod and its
// mirror (nil if none).
func (m *Manager) PodAndMirror(pod *v1.Pod) (run, mirror *v1.Pod, wasMirror bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	name := podutil.FullName(pod)
	if podutil.IsMirrorPod(pod) {
		return m.byName[name], pod, true
	}
	return pod, m.mirror[name], false
}

// MirrorOf returns the mirror pod of a static pod, or nil.
func (m *Manager) MirrorOf(pod *v1.Pod) *v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mirror[podutil.FullName(pod)]
}

// Pods returns the desired pods (no mirrors), oldest first (by creation,
// then UID), in a new slice.
func (m *Manager) Pods() []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return append(make([]*v1.Pod, 0, len(m.ordered)), m.ordered...)
}

// PodsWithActiveDeadline returns the desired pods that have an active
// deadline; nil (no allocation) when none has.
func (m *Manager) PodsWithActiveDeadline() []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*v1.Pod
	for _, p := range m.byUID {
		if p.Spec.ActiveDeadlineSeconds != nil {
			out = append(out, p)
		}
	}
	return out
}

// SortByCreation sorts pods oldest first (then by UID), the order in which
// the kubelet admits them.
func SortByCreation(pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return Older(pods[i], pods[j]) })
}

// Older reports whether a was created before b (by UID on a tie).
func Older(a, b *v1.Pod) bool {
	ta, tb := a.CreationTimestamp, b.CreationTimestamp
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.UID < b.UID
}
