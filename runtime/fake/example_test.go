package fake_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

// A container that crashes a minute after it starts goes into crash-loop
// back-off, all on a fake clock.
func Example() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := fake.New(fake.Config{Clock: clk})
	if err != nil {
		panic(err)
	}
	rt.SetImageBehavior("crasher:1", fake.Behavior{Exit: true, ExitAfter: time.Minute, ExitCode: 1})
	backoff := runtime.NewBackoff(10*time.Second, 5*time.Minute, 0, clk)

	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", "uid-1"
	pod.Spec.Containers = []v1.Container{{Name: "app", Image: "crasher:1"}}

	syncOnce := func() {
		st, _ := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		res := rt.SyncPod(ctx, pod, st, nil, backoff)
		for _, s := range res.SyncResults {
			fmt.Println(strings.TrimSpace(fmt.Sprintf("%s %s %s", s.Action, s.Target, runtime.Reason(s.Error))))
		}
		app, _ := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		c := app.FindContainerStatusByName("app")
		fmt.Printf("  app: %s, restarts %d\n", c.State, c.RestartCount)
	}

	syncOnce()
	clk.Step(time.Minute) // the container exits
	syncOnce()            // first restart at once
	clk.Step(time.Minute) // it exits again
	syncOnce()            // now it backs off
	fmt.Println("starts:", rt.CallCount("StartContainer"))
	// Output:
	// CreatePodSandbox uid-1
	// StartContainer app
	//   app: running, restarts 0
	// StartContainer app
	//   app: running, restarts 1
	// StartContainer app CrashLoopBackOff
	//   app: exited, restarts 1
	// starts: 2
}
