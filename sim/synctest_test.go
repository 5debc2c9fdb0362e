//go:build !race

// Under the race detector this test is skipped (synctest_race_test.go):
// go1.26's race runtime crashes intermittently in a synctest bubble that
// runs a cluster for an hour (SIGSEGV in ThreadSanitizer's stack depot, no
// Go frame at fault, about one full run of this package in five). .ci/run
// runs it without -race.

package sim_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/sim"
)

// Inside a synctest bubble the cluster runs on the real clock, which the
// bubble makes virtual: time jumps whenever every goroutine is blocked.
func TestClusterInSynctestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl, err := sim.New(sim.Config{Clock: clock.RealClock{}})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for _, n := range []string{"n1", "n2"} {
			if _, err := cl.AddNode(n); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second)
		ctx := context.Background()
		if _, err := cl.CreatePod(ctx, pod("web", nil)); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.CreatePod(ctx, pod("crash", map[string]string{sim.ExitAnnotation: "0s:1"})); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.Sleep(time.Hour)
		synctest.Wait()
		if d := time.Since(start); d != time.Hour {
			t.Fatalf("an hour took %v in the bubble", d)
		}
		web, _ := cl.Pod("default", "web")
		crash, _ := cl.Pod("default", "crash")
		if web.Status.Phase != v1.PodRunning {
			t.Errorf("web is %s, want Running", web.Status.Phase)
		}
		// 1s, then 10s, 20s ... 5m back-offs, each plus the 1s relist:
		// 16 restarts in the hour.
		if got := crash.Status.ContainerStatuses[0].RestartCount; got != 16 {
			t.Errorf("crash restarted %d times in an hour, want 16", got)
		}
	})
}
