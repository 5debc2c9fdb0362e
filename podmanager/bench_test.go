package podmanager_test

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmanager"
)

// BenchmarkAddOneThenList is the agent's admission of pods arriving one at
// a time, as an apiserver watch delivers them: each op adds N pods, newest
// last, listing all pods (Pods) after each add, as admission lists the pods
// already on the node.
func BenchmarkAddOneThenList(b *testing.B) {
	for _, n := range []int{100, 1000} {
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		pods := make([]*v1.Pod, n)
		for i := range pods {
			pods[i] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "ns",
				UID: types.UID(fmt.Sprintf("uid%d", i)), CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i) * time.Millisecond))}}
		}
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				m := podmanager.New()
				for _, p := range pods {
					m.AddOrUpdate(p)
					if got := m.Pods(); len(got) == 0 {
						b.Fatal("no pods listed")
					}
				}
			}
		})
	}
}
