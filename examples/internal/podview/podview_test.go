package podview_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/examples/internal/podview"
	"github.com/nodekit/nodekit/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func pod(name string, phase v1.PodPhase, cs ...v1.ContainerStatus) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Status:     v1.PodStatus{Phase: phase, ContainerStatuses: cs},
	}
}

func running(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func Example() {
	job := pod("job-node1", v1.PodSucceeded, v1.ContainerStatus{Name: "job",
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}})
	crash := pod("crash-node1", v1.PodRunning, v1.ContainerStatus{Name: "crash", RestartCount: 2,
		State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}})
	web := pod("web-node1", v1.PodRunning, running("web"))
	web.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "setup",
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	rejected := pod("big-node1", v1.PodFailed)
	rejected.Status.Reason, rejected.Status.Message = "OutOfpods", "node has 110 pods"
	podview.Render(os.Stdout, []*v1.Pod{web, job, crash, rejected})
	// Output:
	// POD          PHASE               CONTAINER   STATE                                            RESTARTS
	// big-node1    Failed (OutOfpods)  -           node has 110 pods                                -
	// crash-node1  Running             crash       waiting CrashLoopBackOff, last exited 3 (Error)  2
	// job-node1    Succeeded           job         exited 0 (Completed)                             0
	// web-node1    Running             init:setup  exited 0 (Completed)                             0
	// web-node1    Running             web         running                                          0
}

func TestUpdatePrintsOnlyChanges(t *testing.T) {
	var out bytes.Buffer
	pods := []*v1.Pod{pod("a", v1.PodPending)}
	clk := clocktesting.NewFakeClock(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
	v, err := podview.New(podview.Config{Out: &out, Pods: func() []*v1.Pod { return pods }, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		pods  []*v1.Pod
		print bool
	}{
		{"first frame is printed", pods, true},
		{"same table is not printed again", []*v1.Pod{pod("a", v1.PodPending)}, false},
		{"phase change is printed", []*v1.Pod{pod("a", v1.PodRunning, running("c"))}, true},
		{"new pod is printed", []*v1.Pod{pod("a", v1.PodRunning, running("c")), pod("b", v1.PodPending)}, true},
		{"order of the list does not matter", []*v1.Pod{pod("b", v1.PodPending), pod("a", v1.PodRunning, running("c"))}, false},
	}
	for _, s := range steps {
		pods = s.pods
		out.Reset()
		if got := v.Update(); got != s.print || (out.Len() > 0) != s.print {
			t.Fatalf("%s: Update() = %v with output %q", s.name, got, out.String())
		}
	}
	v.Update()
	pods = []*v1.Pod{}
	out.Reset()
	v.Update()
	if want := "--- 03:04:05.000  0 pods\n"; !strings.HasPrefix(out.String(), want) {
		t.Fatalf("frame %q, want header %q", out.String(), want)
	}
}

func TestRunPollsUntilContextEnds(t *testing.T) {
	var out testenv.Buffer
	clk := clocktesting.NewFakeClock(time.Now())
	var mu sync.Mutex
	phase := v1.PodPending
	polled := make(chan struct{}, 10)
	list := func() []*v1.Pod {
		mu.Lock()
		defer mu.Unlock()
		polled <- struct{}{}
		return []*v1.Pod{pod("a", phase)}
	}
	v, err := podview.New(podview.Config{Out: &out, Pods: list, Clock: clk, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { v.Run(ctx); close(done) }()
	<-polled // the first frame, at once
	mu.Lock()
	phase = v1.PodRunning
	mu.Unlock()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(time.Second)
	<-polled
	cancel()
	<-done
	if got := strings.Count(out.String(), "---"); got != 2 {
		t.Fatalf("%d frames, want 2:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "Running") {
		t.Fatalf("second frame missing:\n%s", out.String())
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	list := func() []*v1.Pod { return nil }
	for name, c := range map[string]podview.Config{
		"no writer":       {Pods: list},
		"no pod list":     {Out: os.Stdout},
		"negative period": {Out: os.Stdout, Pods: list, Period: -time.Second},
	} {
		if _, err := podview.New(c); !errors.Is(err, podview.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestFollowPrintsALastFrameAfterRunReturns(t *testing.T) {
	var out testenv.Buffer
	var mu sync.Mutex
	phase := v1.PodRunning
	list := func() []*v1.Pod {
		mu.Lock()
		defer mu.Unlock()
		return []*v1.Pod{pod("a", phase)}
	}
	v, err := podview.New(podview.Config{Out: &out, Pods: list, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	want := errors.New("run failed")
	got := v.Follow(func() error {
		mu.Lock()
		defer mu.Unlock()
		phase = v1.PodSucceeded
		return want
	})
	if got != want {
		t.Fatalf("Follow returned %v, want run's error", got)
	}
	if !strings.Contains(out.String(), "Succeeded") {
		t.Fatalf("no frame after run returned:\n%s", out.String())
	}
}

func TestRenderShowsReadinessOfProbedContainers(t *testing.T) {
	p := pod("web", v1.PodRunning, running("probed"), running("plain"))
	p.Spec.Containers = []v1.Container{{Name: "probed", ReadinessProbe: &v1.Probe{}}, {Name: "plain"}}
	var out bytes.Buffer
	podview.Render(&out, []*v1.Pod{p})
	if !strings.Contains(out.String(), "running; not ready") || strings.Count(out.String(), "ready") != 1 {
		t.Fatalf("unready probed container not shown as such, or a plain one shown:\n%s", out.String())
	}
	p.Status.ContainerStatuses[0].Ready = true
	out.Reset()
	podview.Render(&out, []*v1.Pod{p})
	if !strings.Contains(out.String(), "running; ready") {
		t.Fatalf("ready container not shown:\n%s", out.String())
	}
}
