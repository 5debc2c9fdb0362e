package prober

import (
	"context"
	goruntime "runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// Start holds no goroutine while nothing is probed or pending: the pump
// runs while a change is to be delivered and ends after it, and stopped
// closes once ctx has ended.
func TestStartHoldsNoGoroutineWhileIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		st := &fakeStatus{m: map[types.UID]*v1.PodStatus{}}
		var mu sync.Mutex
		var got []Update
		m, err := New(Config{Status: st, Runner: newFakeRunner(), Clock: clk, Jitter: func(time.Duration) time.Duration { return 0 },
			OnUpdate: func(_ context.Context, u Update) { mu.Lock(); got = append(got, u); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		g0 := goruntime.NumGoroutine()
		stopped, err := m.Start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if g := goruntime.NumGoroutine(); g != g0 {
			t.Fatalf("%d goroutines after Start without pods, want %d", g, g0)
		}
		if _, err := m.Start(ctx); err == nil {
			t.Fatal("a second Start: no error")
		}

		yes := true
		pod := podWith("u1", v1.Container{Name: "app", ReadinessProbe: execProbe("ok")})
		st.set(pod.UID, v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "app",
			ContainerID: "fake://c1", Started: &yes,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(clk.Now())}}}}})
		m.AddPod(pod)
		synctest.Wait()
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n != 1 || got[0].Result != Success {
			t.Fatalf("updates %+v, want one Success", got)
		}
		m.pumpMu.Lock()
		pumping := m.pumping
		m.pumpMu.Unlock()
		if pumping {
			t.Error("the pump still runs with nothing pending")
		}
		if g := goruntime.NumGoroutine(); g != g0+1 {
			t.Errorf("%d goroutines with one probe worker, want %d", g, g0+1)
		}
		cancel()
		<-stopped
		synctest.Wait()
		if g := goruntime.NumGoroutine(); g != g0 {
			t.Errorf("%d goroutines after stopped closed, want %d", g, g0)
		}
	})
}
