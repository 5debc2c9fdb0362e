package agent

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/status/statustest"
)

// Config.FirstStatusDelay: a pod the runtime starts within the delay gets
// one status write, its Running one; a start that takes longer reports
// Pending when the delay ends; without it, the kubelet's order (Pending
// first, set before the runtime is called).
func TestFirstStatusDelay(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
		// untilPending: the runtime's SyncPod waits until the Pending
		// status was written (a start that outlasts any such write).
		untilPending bool
		want         []v1.PodPhase // phases of the status writes, in order
	}{
		{"without a delay Pending is written before the runtime starts the pod", 0, true, []v1.PodPhase{v1.PodPending, v1.PodRunning}},
		{"a pod started within the delay gets one write", time.Minute, false, []v1.PodPhase{v1.PodRunning}},
		{"a start longer than the delay reports Pending when it ends", 50 * time.Millisecond, true, []v1.PodPhase{v1.PodPending, v1.PodRunning}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("first", v1.RestartPolicyAlways, "app")
			// Known to the status manager: it writes without reading first,
			// so a read does not give the sync time to finish.
			pod.ResourceVersion = "1"
			pods := statustest.New(pod)
			f, _ := fake.New(fake.Config{})
			rt := &gatedSync{Runtime: f, proceed: make(chan struct{})}
			if !tc.untilPending {
				close(rt.proceed)
			}
			c := fastConfig(rt)
			// The relist that sees the start comes at once; the relist
			// period cannot be what makes a second write.
			c.RelistPeriod, c.RelistOnRequest = time.Hour, true
			c.FirstStatusDelay = tc.delay
			c.StatusClient = func(ns string) status.PodClient { return pods.Pods(ns) }
			r := start(t, c)
			r.set(pod)
			if tc.untilPending {
				waitFor(t, "Pending in the apiserver", func() bool {
					p, ok := pods.Pod("default", pod.Name)
					return ok && p.Status.Phase == v1.PodPending
				})
				close(rt.proceed)
			}
			waitFor(t, "Running and Ready in the apiserver", func() bool {
				p, ok := pods.Pod("default", pod.Name)
				return ok && p.Status.Phase == v1.PodRunning && podReady(p)
			})
			r.stop()
			var got []v1.PodPhase
			for _, a := range pods.Actions() {
				if a.Verb != statustest.VerbPatch {
					continue
				}
				var p struct {
					Status struct {
						Phase v1.PodPhase `json:"phase"`
					} `json:"status"`
				}
				if err := json.Unmarshal(a.Patch, &p); err != nil {
					t.Fatalf("patch %s: %v", a.Patch, err)
				}
				got = append(got, p.Status.Phase)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("status writes with phases %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("status writes with phases %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// gatedSync is a fake runtime whose SyncPod waits until proceed is closed.
type gatedSync struct {
	*fake.Runtime
	proceed chan struct{}
}

func (g *gatedSync) SyncPod(ctx context.Context, pod *v1.Pod, st *runtime.PodStatus, secrets []v1.Secret, b *runtime.Backoff) runtime.PodSyncResult {
	select {
	case <-g.proceed:
	case <-ctx.Done():
	}
	return g.Runtime.SyncPod(ctx, pod, st, secrets, b)
}
