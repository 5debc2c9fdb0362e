package lifecycle

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func sidecarPod() *v1.Pod {
	always := ptr.To(v1.ContainerRestartPolicyAlways)
	pod := &v1.Pod{}
	pod.Spec.InitContainers = []v1.Container{{Name: "sc1", RestartPolicy: always}, {Name: "init"}, {Name: "sc2", RestartPolicy: always}}
	pod.Spec.Containers = []v1.Container{{Name: "a"}, {Name: "b"}}
	return pod
}

// waiting starts WaitForTurn and returns a channel with what it waited.
func waiting(o *Ordering, name string, grace int64) chan time.Duration {
	ch := make(chan time.Duration, 1)
	go func() { ch <- o.WaitForTurn(context.Background(), name, grace) }()
	return ch
}

func blocked(t *testing.T, ch chan time.Duration, what string) {
	t.Helper()
	select {
	case d := <-ch:
		t.Fatalf("%s returned (%v) too early", what, d)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestOrderingStopsSidecarsLast(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	o := NewOrdering(sidecarPod(), []string{"sc1", "sc2", "a", "b"}, clk)
	if d := o.WaitForTurn(context.Background(), "a", 30); d != 0 {
		t.Fatalf("a regular container waited %v", d)
	}
	sc1, sc2 := waiting(o, "sc1", 30), waiting(o, "sc2", 30)
	o.Terminated("a")
	blocked(t, sc2, "sc2 with b running")
	o.Terminated("b")
	if d := <-sc2; d != 0 {
		t.Fatalf("sc2 waited %v on a clock that did not move", d)
	}
	blocked(t, sc1, "sc1 with the later sidecar sc2 running")
	o.Terminated("sc2")
	<-sc1
}

func TestOrderingSkipsWhatDoesNotRunAndEndsWithTheGracePeriod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	o := NewOrdering(sidecarPod(), []string{"sc1", "a"}, clk)
	ch := waiting(o, "sc1", 30)
	blocked(t, ch, "sc1 with a running")
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(30 * time.Second)
	if d := <-ch; d != 30*time.Second {
		t.Fatalf("sc1 waited %v, want the grace period", d)
	}
	o.Terminated("a")
	o.Terminated("a") // twice is harmless
}

func TestOrderingWithoutSidecarsIsNil(t *testing.T) {
	pod := &v1.Pod{}
	pod.Spec.InitContainers = []v1.Container{{Name: "init"}}
	pod.Spec.Containers = []v1.Container{{Name: "a"}}
	o := NewOrdering(pod, []string{"a"}, nil)
	if o != nil {
		t.Fatal("an Ordering for a pod without sidecars")
	}
	if NewOrdering(nil, nil, nil) != nil {
		t.Fatal("an Ordering for no pod")
	}
	if d := o.WaitForTurn(context.Background(), "a", 30); d != 0 {
		t.Fatalf("nil Ordering waited %v", d)
	}
	o.Terminated("a")
}
