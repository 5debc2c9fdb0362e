package podmanager_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
