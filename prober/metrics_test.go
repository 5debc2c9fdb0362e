package prober

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMetricsCountProbesByResultAndGoWithTheWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := &env{t: t, clk: clk, status: &fakeStatus{m: map[types.UID]*v1.PodStatus{}}, runner: newFakeRunner(), rec: &recorder{}}
		m, err := New(Config{Status: e.status, Runner: e.runner, Clock: clk, Registerer: reg,
			Jitter: func(time.Duration) time.Duration { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		e.m = m
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = m.Run(ctx) }()

		e.runner.setCode("live", 1)
		pod := podWith("u1", v1.Container{Name: "app", ReadinessProbe: execProbe("ready"), LivenessProbe: execProbe("live")})
		e.running(pod, "app", "fake://c1", 0, true)
		m.AddPod(pod)
		e.step(0)
		e.step(time.Second)
		want := `
# HELP prober_probe_total Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
prober_probe_total{container="app",namespace="ns",pod="p-u1",pod_uid="u1",probe_type="Liveness",result="failed"} 2
prober_probe_total{container="app",namespace="ns",pod="p-u1",pod_uid="u1",probe_type="Liveness",result="successful"} 0
prober_probe_total{container="app",namespace="ns",pod="p-u1",pod_uid="u1",probe_type="Liveness",result="unknown"} 0
prober_probe_total{container="app",namespace="ns",pod="p-u1",pod_uid="u1",probe_type="Readiness",result="failed"} 0
prober_probe_total{container="app",namespace="ns",pod="p-u1",pod_uid="u1",probe_type="Readiness",result="successful"} 2
prober_probe_total{container="app",namespace="ns",pod="p-u1",pod_uid="u1",probe_type="Readiness",result="unknown"} 0
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "prober_probe_total"); err != nil {
			t.Fatal(err)
		}
		if n := testutil.CollectAndCount(reg, "prober_probe_duration_seconds"); n != 2 {
			t.Fatalf("%d duration series, want 2", n)
		}
		m.RemovePod(pod.UID)
		e.step(0)
		if n := testutil.CollectAndCount(reg, "prober_probe_total", "prober_probe_duration_seconds"); n != 0 {
			t.Fatalf("%d series left after the workers stopped", n)
		}
		cancel()
		<-done
	})
}
