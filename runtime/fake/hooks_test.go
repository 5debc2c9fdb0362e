package fake_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

// eventList renders events as "Reason [path]: message", in order.
func eventList(rec *podconfigtest.Recorder) []string {
	var out []string
	for _, e := range rec.Events() {
		path := ""
		if ref, ok := e.Object.(*v1.ObjectReference); ok {
			path = " " + ref.FieldPath
		}
		out = append(out, e.Reason+path+": "+e.Message)
	}
	return out
}

func execHook(cmd ...string) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: cmd}}
}

func httpHook(port int32, scheme v1.URIScheme) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/hook", Port: intstr.FromInt32(port), Scheme: scheme}}
}

func sleepHook(s int64) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: s}}
}

// stepWhileBlocked runs f and, each time every goroutine of the synctest
// bubble waits, steps the clock by step, until f returns. It must run in a
// bubble.
func stepWhileBlocked(clk *clocktesting.FakeClock, step time.Duration, f func()) {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	for {
		synctest.Wait()
		select {
		case <-done:
			return
		default:
			clk.Step(step)
		}
	}
}

func TestPostStartHooks(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hook       *v1.LifecycleHandler
		exit       int
		readyAfter time.Duration
		sidecar    bool
		wantErr    error
		wantEvents []string
	}{
		{name: "exec hook passes", hook: execHook("touch", "/x"),
			wantEvents: []string{`Pulled spec.containers{app}: Container image "app:1" already present on machine`,
				"Created spec.containers{app}: Created container: app", "Started spec.containers{app}: Started container app"}},
		{name: "a failing exec hook kills the container and fails the start", hook: execHook("false"), exit: 1, wantErr: runtime.ErrPostStartHook,
			wantEvents: []string{`Pulled spec.containers{app}: Container image "app:1" already present on machine`,
				"Created spec.containers{app}: Created container: app", "Started spec.containers{app}: Started container app",
				"FailedPostStartHook spec.containers{app}: PostStartHook failed", "Killing spec.containers{app}: FailedPostStartHook"}},
		{name: "httpGet hook reaches the pod on the in-memory network", hook: httpHook(8080, "")},
		{name: "httpGet hook fails while the port is closed", hook: httpHook(8080, ""), readyAfter: time.Minute, wantErr: runtime.ErrPostStartHook},
		{name: "https hook answered in plain HTTP falls back to http", hook: httpHook(8080, v1.URISchemeHTTPS),
			wantEvents: []string{`Pulled spec.containers{app}: Container image "app:1" already present on machine`,
				"Created spec.containers{app}: Created container: app", "Started spec.containers{app}: Started container app",
				"LifecycleHTTPFallback: request to HTTPS lifecycle hook 10.0.0.1:8080 got HTTP response, retry with HTTP succeeded"}},
		{name: "a sidecar's hook runs too", hook: execHook("false"), exit: 1, sidecar: true, wantErr: runtime.ErrPostStartHook},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &podconfigtest.Recorder{}
			rt, _ := newRuntime(t, fake.Config{Recorder: rec, Images: []string{"app:1", "main:1"}})
			c := ctr("app")
			c.Ports = []v1.ContainerPort{{ContainerPort: 8080}}
			c.Lifecycle = &v1.Lifecycle{PostStart: tc.hook}
			pod := newPod("ps", v1.RestartPolicyAlways, c)
			pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](9)
			if tc.sidecar {
				c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
				pod.Spec.InitContainers = []v1.Container{c}
				pod.Spec.Containers = []v1.Container{ctr("main")}
			}
			if tc.hook.Exec != nil {
				rt.SetExecResult("app", tc.hook.Exec.Command, fake.ExecResult{ExitCode: tc.exit})
			}
			rt.SetContainerBehavior("app", fake.Behavior{ReadyAfter: tc.readyAfter})
			res := sync(t, rt, pod, nil)
			hooks := rt.Hooks()
			require.Len(t, hooks, 1)
			require.Equal(t, "PostStart", hooks[0].Hook)
			require.Equal(t, "app", hooks[0].Container)
			if tc.wantErr == nil {
				require.NoError(t, res.Error())
				require.NoError(t, hooks[0].Err)
				require.Equal(t, runtime.ContainerStateRunning, newest(t, rt, pod, "app").State)
			} else {
				require.ErrorIs(t, res.Error(), tc.wantErr)
				require.Error(t, hooks[0].Err)
				require.Equal(t, runtime.ContainerStateExited, newest(t, rt, pod, "app").State, "the container is killed")
				kills := rt.Kills()
				require.Len(t, kills, 1)
				require.EqualValues(t, 9, kills[0].GracePeriod)
			}
			if tc.wantEvents != nil {
				require.Equal(t, tc.wantEvents, eventList(rec))
			}
			if tc.sidecar {
				require.Contains(t, eventList(rec), "FailedPostStartHook spec.initContainers{app}: PostStartHook failed")
			}
		})
	}
}

func TestPreStopHooks(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hook       *v1.LifecycleHandler
		exit       int
		ignoreTERM bool
		killMsg    string
		orphan     bool
		wantGrace  int64
		wantForced bool
		wantTook   time.Duration
		wantEvents []string
	}{
		{name: "exec hook runs before TERM", hook: execHook("drain"), wantGrace: 30,
			wantEvents: []string{"Killing spec.containers{app}: Stopping container app"}},
		{name: "a sleep's time is taken out of the grace period", hook: sleepHook(10), wantGrace: 20, wantTook: 10 * time.Second},
		{name: "a sleep past the grace period is cut, the minimum is left", hook: sleepHook(100), wantGrace: 2, wantTook: 30 * time.Second},
		{name: "a container ignoring TERM gets what is left after the hook", hook: sleepHook(10), ignoreTERM: true,
			wantGrace: 20, wantForced: true, wantTook: 30 * time.Second},
		{name: "a failing hook is an event, the container still stops", hook: execHook("drain"), exit: 2, wantGrace: 30,
			wantEvents: []string{"Killing spec.containers{app}: Stopping container app", "FailedPreStopHook spec.containers{app}: PreStopHook failed"}},
		{name: "the caller's kill message is the Killing event's", hook: execHook("drain"), wantGrace: 30,
			killMsg:    "Container app failed liveness probe, will be restarted",
			wantEvents: []string{"Killing spec.containers{app}: Container app failed liveness probe, will be restarted"}},
		{name: "an orphan's hook runs, without events", hook: execHook("drain"), orphan: true, wantGrace: 30, wantEvents: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &podconfigtest.Recorder{}
				rt, clk := newRuntime(t, fake.Config{Recorder: rec, Images: []string{"app:1"}})
				c := ctr("app")
				c.Lifecycle = &v1.Lifecycle{PreStop: tc.hook}
				pod := newPod("pst", v1.RestartPolicyAlways, c)
				pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
				if tc.hook.Exec != nil {
					rt.SetExecResult("app", tc.hook.Exec.Command, fake.ExecResult{ExitCode: tc.exit})
				}
				rt.SetContainerBehavior("app", fake.Behavior{IgnoreTERM: tc.ignoreTERM})
				require.NoError(t, sync(t, rt, pod, nil).Error())
				before := len(rec.Events())
				ctx := context.Background()
				if tc.killMsg != "" {
					ctx = runtime.WithKillMessage(ctx, tc.killMsg)
				}
				kill := pod
				if tc.orphan {
					kill = nil
				}
				running := status(t, rt, pod).RunningPod(rt.Type())
				start := clk.Now()
				var err error
				stepWhileBlocked(clk, time.Second, func() { err = rt.KillPod(ctx, kill, running, nil) })
				require.NoError(t, err)
				require.Equal(t, tc.wantTook, clk.Since(start))
				kills := rt.Kills()
				require.Len(t, kills, 1)
				require.Equal(t, tc.wantGrace, kills[0].GracePeriod)
				require.Equal(t, tc.wantForced, kills[0].Forced)
				hooks := rt.Hooks()
				require.Len(t, hooks, 1)
				require.Equal(t, "PreStop", hooks[0].Hook)
				require.Equal(t, tc.exit != 0, hooks[0].Err != nil)
				if tc.wantEvents != nil {
					require.Equal(t, tc.wantEvents, append([]string{}, eventList(rec)[before:]...))
				}
			})
		})
	}
}

func TestRuntimeManagerEvents(t *testing.T) {
	t.Run("pull, create, start and stop", func(t *testing.T) {
		rec := &podconfigtest.Recorder{}
		rt, _ := newRuntime(t, fake.Config{Recorder: rec})
		require.True(t, rt.RecordsEvents())
		pod := newPod("ev", v1.RestartPolicyAlways, ctr("app"))
		require.NoError(t, sync(t, rt, pod, nil).Error())
		require.NoError(t, rt.KillPod(context.Background(), pod, status(t, rt, pod).RunningPod(rt.Type()), nil))
		require.Equal(t, []string{`Pulling spec.containers{app}: Pulling image "app:1"`,
			`Pulled spec.containers{app}: Successfully pulled image "app:1" in 0s (0s including waiting). Image size: 1048576 bytes.`,
			"Created spec.containers{app}: Created container: app", "Started spec.containers{app}: Started container app",
			"Killing spec.containers{app}: Stopping container app"}, eventList(rec))
	})
	t.Run("failed pull, then pull back-off", func(t *testing.T) {
		rec := &podconfigtest.Recorder{}
		rt, clk := newRuntime(t, fake.Config{Recorder: rec})
		rt.SetImageBehavior("app:1", fake.Behavior{PullError: "manifest unknown"})
		pod := newPod("ev", v1.RestartPolicyAlways, ctr("app"))
		require.ErrorIs(t, sync(t, rt, pod, nil).Error(), runtime.ErrImagePull)
		clk.Step(4 * time.Second)
		err := sync(t, rt, pod, nil).Error()
		require.ErrorIs(t, err, runtime.ErrImagePullBackOff)
		// The refusal says when a pull may be tried: the first back-off
		// (10s, the kubelet's) less the 4s since the failed pull.
		left, says := runtime.BackOffRemaining(err)
		require.True(t, says, "the pull back-off does not say when it ends")
		require.Equal(t, 6*time.Second, left)
		require.Equal(t, []string{`Pulling spec.containers{app}: Pulling image "app:1"`,
			`Failed spec.containers{app}: Failed to pull image "app:1": manifest unknown`,
			"Failed spec.containers{app}: Error: ErrImagePull",
			`BackOff spec.containers{app}: Back-off pulling image "app:1"`,
			"Failed spec.containers{app}: Error: ImagePullBackOff"}, eventList(rec))
	})
	t.Run("crash-loop back-off and a changed sandbox", func(t *testing.T) {
		rec := &podconfigtest.Recorder{}
		rt, clk := newRuntime(t, fake.Config{Recorder: rec, Images: []string{"app:1"}})
		rt.SetContainerBehavior("app", fake.Behavior{Exit: true, ExitCode: 1})
		pod := newPod("ev", v1.RestartPolicyAlways, ctr("app"))
		b := runtime.NewBackoff(10*time.Second, time.Minute, 0, clk)
		require.NoError(t, sync(t, rt, pod, b).Error())
		require.NoError(t, sync(t, rt, pod, b).Error())
		require.ErrorIs(t, sync(t, rt, pod, b).Error(), runtime.ErrCrashLoopBackOff)
		got := eventList(rec)
		require.Equal(t, "BackOff spec.containers{app}: Back-off restarting failed container app in pod ev_default(uid-ev)", got[len(got)-1])

		st := status(t, rt, pod)
		require.NoError(t, rt.KillPod(context.Background(), pod, st.RunningPod(rt.Type()), nil))
		clk.Step(time.Hour)
		require.NoError(t, sync(t, rt, pod, b).Error())
		var podEvents []string
		for _, e := range rec.Events() {
			if _, ok := e.Object.(*v1.Pod); ok {
				podEvents = append(podEvents, e.Reason+": "+e.Message)
			}
		}
		require.Equal(t, []string{"SandboxChanged: Pod sandbox changed, it will be killed and re-created."}, podEvents)
	})
	t.Run("no recorder, no events", func(t *testing.T) {
		rt, _ := newRuntime(t, fake.Config{})
		require.False(t, rt.RecordsEvents())
	})
}
