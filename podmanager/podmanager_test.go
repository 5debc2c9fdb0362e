package podmanager_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmanager"
)

func TestRemoveOfOldUIDKeepsNewPodOfSameName(t *testing.T) {
	m := podmanager.New()
	old := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "old"}}
	cur := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "new", CreationTimestamp: metav1.Now()}}
	m.AddOrUpdate(old)
	m.AddOrUpdate(cur)
	m.Remove(old)
	got, ok := m.GetPodByFullName("web_ns")
	assert.True(t, ok)
	assert.Equal(t, cur, got)
	_, ok = m.GetPodByUID("old")
	assert.False(t, ok)
	assert.Equal(t, []*v1.Pod{cur}, m.Pods())
	assert.Nil(t, m.PodsWithActiveDeadline(), "no pod has a deadline: nil, no allocation")
}

func TestPodsOldestFirst(t *testing.T) {
	m := podmanager.New()
	now := metav1.Now()
	older := metav1.NewTime(now.Add(-1e9))
	b := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "b", CreationTimestamp: now}}
	a2 := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a2", UID: "a2", CreationTimestamp: older}}
	a1 := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a1", UID: "a1", CreationTimestamp: older}}
	for _, p := range []*v1.Pod{b, a2, a1} {
		m.AddOrUpdate(p)
	}
	assert.Equal(t, []*v1.Pod{a1, a2, b}, m.Pods(), "by creation, then UID")
}

// Pods stays oldest first, as sorting every pod would give, whatever the
// order pods are added, updated (a new object, even a new creation time)
// and removed in.
func TestPodsStayOrderedThroughAddsUpdatesAndRemoves(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := podmanager.New()
	want := map[types.UID]*v1.Pod{}
	for step := range 3000 {
		uid := types.UID(fmt.Sprintf("uid%d", rng.IntN(200)))
		switch rng.IntN(4) {
		case 0:
			if p, ok := want[uid]; ok {
				m.Remove(p)
				delete(want, uid)
				break
			}
			fallthrough
		default:
			// Few distinct times, so that ties are broken by UID.
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(uid), Namespace: "ns", UID: uid,
				CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(rng.IntN(20)) * time.Second))}}
			m.AddOrUpdate(p)
			want[uid] = p
		}
		ref := make([]*v1.Pod, 0, len(want))
		for _, p := range want {
			ref = append(ref, p)
		}
		podmanager.SortByCreation(ref)
		require.Equal(t, ref, m.Pods(), "step %d", step)
	}
	assert.Equal(t, []*v1.Pod{}, podmanager.New().Pods(), "empty, not nil")
}
