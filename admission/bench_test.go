package admission_test

import (
	"fmt"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
)

// BenchmarkAdmitBatch admits N pods one after another with GeneralPredicates,
// each against the ones admitted before it, as the agent admits a batch of
// additions (a virtual node handed thousands of pods at once). "usage" keeps
// the admitted pods' Usage from pod to pod, as the agent does; "summed"
// leaves the handler to sum them for every pod (quadratic). One op is the
// whole batch.
func BenchmarkAdmitBatch(b *testing.B) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: v1.NodeStatus{Allocatable: rl("cpu", "100000", "memory", "100Ti", "pods", "100000")}}
	h := admission.GeneralPredicates(func() *v1.Node { return node })
	for _, tc := range []struct {
		variant string
		n       int
	}{{"usage", 1000}, {"usage", 10000}, {"summed", 1000}} {
		pods := make([]*v1.Pod, tc.n)
		for i := range pods {
			p := reqPod("cpu", "100m", "memory", "128Mi")
			p.Name, p.UID = "p"+strconv.Itoa(i), types.UID("u"+strconv.Itoa(i))
			pods[i] = p
		}
		b.Run(fmt.Sprintf("%s/N=%d", tc.variant, tc.n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				admitted := make([]*v1.Pod, 0, len(pods))
				var used *admission.Usage
				if tc.variant == "usage" {
					used = admission.NewUsage(nil)
				}
				for _, p := range pods {
					if r := h.Admit(&admission.PodAdmitAttributes{Pod: p, OtherPods: admitted, OtherPodsUsage: used}); !r.Admit {
						b.Fatalf("refused: %s", r.Message)
					}
					admitted = append(admitted, p)
					if used != nil {
						used.Add(p)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tc.n), "ns/pod")
		})
	}
}
