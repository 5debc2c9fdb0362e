package agent

import (
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podutil"
)

// podManager is the agent's view of the desired pods: every pod some source
// wants, and the mirror pods of static pods, keyed so a static pod and its
// mirror find each other by full name.
type podManager struct {
	mu     sync.RWMutex
	byUID  map[types.UID]*v1.Pod
	byName map[string]*v1.Pod // full name -> pod (not mirror)
	mirror map[string]*v1.Pod // full name -> mirror pod
}

func newPodManager() *podManager {
	return &podManager{byUID: map[types.UID]*v1.Pod{}, byName: map[string]*v1.Pod{}, mirror: map[string]*v1.Pod{}}
}

// addOrUpdate stores pod (a mirror pod goes to the mirror index).
func (m *podManager) addOrUpdate(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name := podutil.FullName(pod)
	if podutil.IsMirrorPod(pod) {
		m.mirror[name] = pod
		return
	}
	m.byUID[pod.UID] = pod
	m.byName[name] = pod
}

// remove forgets pod.
func (m *podManager) remove(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name := podutil.FullName(pod)
	if podutil.IsMirrorPod(pod) {
		if cur, ok := m.mirror[name]; ok && cur.UID == pod.UID {
			delete(m.mirror, name)
		}
		return
	}
	delete(m.byUID, pod.UID)
	if cur, ok := m.byName[name]; ok && cur.UID == pod.UID {
		delete(m.byName, name)
	}
}

// GetPodByUID implements syncloop.PodGetter.
func (m *podManager) GetPodByUID(uid types.UID) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.byUID[uid]
	return p, ok
}

// podAndMirror returns, for any pod, the pod to run and its mirror. For a
// mirror pod whose static pod is unknown the pod is nil.
func (m *podManager) podAndMirror(pod *v1.Pod) (run, mirror *v1.Pod, wasMirror bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	name := podutil.FullName(pod)
	if podutil.IsMirrorPod(pod) {
		return m.byName[name], pod, true
	}
	return pod, m.mirror[name], false
}

// mirrorOf returns the mirror pod of a static pod, or nil.
func (m *podManager) mirrorOf(pod *v1.Pod) *v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mirror[podutil.FullName(pod)]
}

// pods returns the desired pods (no mirrors), oldest first.
func (m *podManager) pods() []*v1.Pod {
	m.mu.RLock()
	out := make([]*v1.Pod, 0, len(m.byUID))
	for _, p := range m.byUID {
		out = append(out, p)
	}
	m.mu.RUnlock()
	sortByCreation(out)
	return out
}

// withActiveDeadline returns the desired pods that have an active deadline;
// nil (no allocation) when none has.
func (m *podManager) withActiveDeadline() []*v1.Pod {
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

func sortByCreation(pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return olderPod(pods[i], pods[j]) })
}

// olderPod orders pods by creation, then UID.
func olderPod(a, b *v1.Pod) bool {
	ta, tb := a.CreationTimestamp, b.CreationTimestamp
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.UID < b.UID
}
