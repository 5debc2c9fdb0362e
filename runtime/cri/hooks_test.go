package cri_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

// withRecorder records the manager's events on rec.
func withRecorder(rec *podconfigtest.Recorder) func(*cri.Config) {
	return func(c *cri.Config) { c.Recorder = rec }
}

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

func exec(cmd ...string) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: cmd}}
}

// hookServer is an HTTP server that records the paths it is asked for and
// how many StopContainer calls the fake runtime had seen by then.
type hookServer struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
	stops []int
}

func newHookServer(t *testing.T, srv *fakecri.Server) *hookServer {
	h := &hookServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.paths = append(h.paths, r.URL.Path)
		h.stops = append(h.stops, srv.Calls("StopContainer"))
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) handler(path string) *v1.LifecycleHandler {
	u, _ := url.Parse(h.URL)
	return &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: u.Hostname(), Port: intstr.Parse(u.Port()), Path: path}}
}

func TestPostStartHook(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hook       func(h *hookServer) *v1.LifecycleHandler
		exit       int32
		sidecar    bool
		wantErr    error
		wantEvents []string
		wantPaths  []string
	}{
		{name: "exec hook runs after the start", hook: func(*hookServer) *v1.LifecycleHandler { return exec("touch", "/started") },
			wantEvents: []string{"Pulled spec.containers{main}: Container image \"busybox:1\" already present on machine",
				"Created spec.containers{main}: Created container: main", "Started spec.containers{main}: Started container main"}},
		{name: "httpGet hook reaches the server", hook: func(h *hookServer) *v1.LifecycleHandler { return h.handler("/started") },
			wantPaths: []string{"/started"}},
		{name: "a failing hook kills the container and fails the start", hook: func(*hookServer) *v1.LifecycleHandler { return exec("false") },
			exit: 1, wantErr: runtime.ErrPostStartHook,
			wantEvents: []string{"Pulled spec.containers{main}: Container image \"busybox:1\" already present on machine",
				"Created spec.containers{main}: Created container: main", "Started spec.containers{main}: Started container main",
				"FailedPostStartHook spec.containers{main}: PostStartHook failed", "Killing spec.containers{main}: FailedPostStartHook"}},
		{name: "a sidecar's hook runs too", sidecar: true, hook: func(*hookServer) *v1.LifecycleHandler { return exec("false") },
			exit: 1, wantErr: runtime.ErrPostStartHook},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &podconfigtest.Recorder{}
			e := newFakeEnv(t, withRecorder(rec))
			hs := newHookServer(t, e.srv)
			hook := tc.hook(hs)
			pod := newPod("ps", "busybox:1", func(p *v1.Pod) {
				p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](7)
				p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: hook}
				if tc.sidecar {
					sc := p.Spec.Containers[0]
					sc.Name, sc.RestartPolicy = "sc", ptr.To(v1.ContainerRestartPolicyAlways)
					p.Spec.InitContainers = []v1.Container{sc}
					p.Spec.Containers[0].Lifecycle = nil
				}
			})
			name := pod.Spec.Containers[0].Name
			if tc.sidecar {
				name = "sc"
			}
			if hook.Exec != nil {
				e.srv.SetExecResult(name, hook.Exec.Command, fakecri.ExecResult{ExitCode: tc.exit, Stderr: "nope"})
			}
			res := e.sync(t, pod, nil)
			if tc.wantErr != nil {
				require.ErrorIs(t, res.Error(), tc.wantErr)
				for _, r := range res.SyncResults {
					if r.Target == name {
						require.Contains(t, r.Message, "Exec lifecycle hook ([false]) for Container \""+name+"\"")
					}
				}
				ids := e.srv.ContainerIDs(name)
				require.Len(t, ids, 1)
				grace, stopped := e.srv.StopTimeout(ids[0])
				require.True(t, stopped, "the container is stopped")
				require.EqualValues(t, 7, grace, "with the pod's grace period")
			} else {
				require.NoError(t, res.Error())
			}
			if hook.Exec != nil {
				require.Equal(t, 1, e.srv.Calls("ExecSync"))
			}
			if tc.wantEvents != nil {
				require.Equal(t, tc.wantEvents, eventList(rec))
			}
			hs.mu.Lock()
			defer hs.mu.Unlock()
			require.Equal(t, tc.wantPaths, hs.paths)
		})
	}
}

func TestPreStopHook(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hook       func(h *hookServer) *v1.LifecycleHandler
		result     fakecri.ExecResult
		grace      int64
		step       time.Duration // clock step while the hook runs
		orphan     bool
		sidecar    bool
		killMsg    string
		wantStop   int64
		wantEvents []string
		wantPaths  []string
	}{
		{name: "exec hook runs before the stop with the grace period left",
			hook: func(*hookServer) *v1.LifecycleHandler { return exec("drain") }, grace: 30, wantStop: 30,
			wantEvents: []string{"Killing spec.containers{main}: Stopping container main"}},
		{name: "httpGet hook reaches the server before the stop",
			hook: func(h *hookServer) *v1.LifecycleHandler { return h.handler("/stop") }, grace: 30, wantStop: 30, wantPaths: []string{"/stop"}},
		{name: "a hook outliving the grace period is cut and the minimum is left",
			hook: func(*hookServer) *v1.LifecycleHandler { return exec("drain") }, result: fakecri.ExecResult{Hang: true},
			grace: 5, step: 5 * time.Second, wantStop: 2},
		{name: "a failing hook is an event and the container still stops",
			hook: func(*hookServer) *v1.LifecycleHandler { return exec("drain") }, result: fakecri.ExecResult{ExitCode: 1},
			grace: 30, wantStop: 30,
			wantEvents: []string{"Killing spec.containers{main}: Stopping container main", "FailedPreStopHook spec.containers{main}: PreStopHook failed"}},
		{name: "the caller's kill message is the Killing event's",
			hook: func(*hookServer) *v1.LifecycleHandler { return exec("drain") }, grace: 30, wantStop: 30,
			killMsg:    "Container main failed liveness probe, will be restarted",
			wantEvents: []string{"Killing spec.containers{main}: Container main failed liveness probe, will be restarted"}},
		{name: "a sidecar's hook runs, on its init container reference",
			hook: func(*hookServer) *v1.LifecycleHandler { return exec("drain") }, grace: 30, sidecar: true, wantStop: 30,
			wantEvents: []string{"Killing spec.initContainers{main}: Stopping container main"}},
		{name: "an orphan's hook comes from its annotations, without events",
			hook: func(*hookServer) *v1.LifecycleHandler { return exec("drain") }, grace: 30, orphan: true, wantStop: 30,
			wantEvents: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &podconfigtest.Recorder{}
			e := newFakeEnv(t, withRecorder(rec))
			hs := newHookServer(t, e.srv)
			hook := tc.hook(hs)
			pod := newPod("pst", "busybox:1", func(p *v1.Pod) {
				p.Spec.TerminationGracePeriodSeconds = ptr.To(tc.grace)
				p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: hook}
				if tc.sidecar {
					sc := p.Spec.Containers[0]
					sc.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
					p.Spec.InitContainers = []v1.Container{sc}
					p.Spec.Containers = []v1.Container{{Name: "app", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent}}
				}
			})
			if hook.Exec != nil {
				e.srv.SetExecResult("main", hook.Exec.Command, tc.result)
			}
			require.NoError(t, e.sync(t, pod, nil).Error())
			before := len(rec.Events())
			st := e.status(t, pod)
			ctx := e.ctx
			if tc.killMsg != "" {
				ctx = runtime.WithKillMessage(ctx, tc.killMsg)
			}
			killPod := pod
			if tc.orphan {
				killPod = nil
			}
			done := make(chan error, 1)
			go func() { done <- e.m.KillPod(ctx, killPod, st.RunningPod(e.m.Type()), nil) }()
			if tc.step > 0 {
				for !e.clock.HasWaiters() {
					time.Sleep(time.Millisecond)
				}
				e.clock.Step(tc.step)
			}
			require.NoError(t, <-done)
			id := e.srv.ContainerIDs("main")[0]
			grace, ok := e.srv.StopTimeout(id)
			require.True(t, ok)
			require.Equal(t, tc.wantStop, grace)
			if hook.Exec != nil {
				require.Equal(t, 1, e.srv.Calls("ExecSync"))
			}
			if tc.wantEvents != nil {
				got := eventList(rec)[before:]
				require.Equal(t, tc.wantEvents, append([]string{}, got...))
			}
			hs.mu.Lock()
			defer hs.mu.Unlock()
			require.Equal(t, tc.wantPaths, hs.paths)
			for _, s := range hs.stops {
				require.Zero(t, s, "the hook ran before the container was stopped")
			}
		})
	}
}

func TestRuntimeManagerEvents(t *testing.T) {
	pulled := regexp.MustCompile(`^Pulled spec.containers\{main\}: Successfully pulled image "busybox:1" in 0s \(0s including waiting\)\. Image size: \d+ bytes\.$`)
	t.Run("pull, create and start", func(t *testing.T) {
		rec := &podconfigtest.Recorder{}
		e := newFakeEnv(t, withRecorder(rec))
		pod := newPod("ev", "busybox:1", func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = v1.PullAlways })
		require.NoError(t, e.sync(t, pod, nil).Error())
		got := eventList(rec)
		require.Len(t, got, 4, "%q", got)
		require.Equal(t, `Pulling spec.containers{main}: Pulling image "busybox:1"`, got[0])
		require.Regexp(t, pulled, got[1])
		require.Equal(t, []string{"Created spec.containers{main}: Created container: main", "Started spec.containers{main}: Started container main"}, got[2:])
	})
	t.Run("failed pull, then pull back-off", func(t *testing.T) {
		rec := &podconfigtest.Recorder{}
		e := newFakeEnv(t, withRecorder(rec))
		e.srv.SetError("PullImage", context.DeadlineExceeded)
		pod := newPod("ev", "busybox:1", func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = v1.PullAlways })
		require.ErrorIs(t, e.sync(t, pod, nil).Error(), runtime.ErrImagePull)
		require.ErrorIs(t, e.sync(t, pod, nil).Error(), runtime.ErrImagePullBackOff)
		got := eventList(rec)
		require.Len(t, got, 5, "%q", got)
		require.Equal(t, `Pulling spec.containers{main}: Pulling image "busybox:1"`, got[0])
		require.True(t, strings.HasPrefix(got[1], `Failed spec.containers{main}: Failed to pull image "busybox:1": `), got[1])
		require.Equal(t, []string{"Failed spec.containers{main}: Error: ErrImagePull",
			`BackOff spec.containers{main}: Back-off pulling image "busybox:1"`,
			"Failed spec.containers{main}: Error: ImagePullBackOff"}, got[2:])
	})
	t.Run("crash-loop back-off", func(t *testing.T) {
		rec := &podconfigtest.Recorder{}
		e := newFakeEnv(t, withRecorder(rec))
		e.srv.SetBehavior("main", fakecri.Behavior{ExitOnStart: true, ExitCode: 1})
		pod := newPod("ev", "busybox:1")
		b := runtime.NewBackoff(10*time.Second, time.Minute, 0, e.clock)
		require.NoError(t, e.sync(t, pod, b).Error())
		require.NoError(t, e.sync(t, pod, b).Error(), "the first restart is not held back")
		require.ErrorIs(t, e.sync(t, pod, b).Error(), runtime.ErrCrashLoopBackOff)
		got := eventList(rec)
		require.Equal(t, "BackOff spec.containers{main}: Back-off restarting failed container main in pod ev_test(uid-ev)", got[len(got)-1])
	})
	t.Run("sandbox changed and sandbox failure", func(t *testing.T) {
		rec := &podconfigtest.Recorder{}
		e := newFakeEnv(t, withRecorder(rec))
		pod := newPod("ev", "busybox:1")
		require.NoError(t, e.sync(t, pod, nil).Error())
		st := e.status(t, pod)
		require.NoError(t, e.m.KillPod(e.ctx, pod, st.RunningPod(e.m.Type()), nil))
		e.srv.FailNext("RunPodSandbox", context.DeadlineExceeded)
		require.ErrorIs(t, e.sync(t, pod, nil).Error(), runtime.ErrCreatePodSandbox)
		var reasons []string
		for _, ev := range rec.Events() {
			if _, ok := ev.Object.(*v1.Pod); ok {
				reasons = append(reasons, ev.Type+" "+ev.Reason+": "+ev.Message)
			}
		}
		require.Len(t, reasons, 2, "%q", reasons)
		require.Equal(t, "Normal SandboxChanged: Pod sandbox changed, it will be killed and re-created.", reasons[0])
		require.True(t, strings.HasPrefix(reasons[1], "Warning FailedCreatePodSandBox: Failed to create pod sandbox: "), reasons[1])
	})
	t.Run("no recorder, no events and no size look-up", func(t *testing.T) {
		e := newFakeEnv(t)
		require.False(t, e.m.RecordsEvents())
		pod := newPod("ev", "busybox:1", func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = v1.PullAlways })
		require.NoError(t, e.sync(t, pod, nil).Error())
		require.Zero(t, e.srv.Calls("ImageStatus"))
	})
}

// TestSidecarsStopAfterTheContainersTheyServe: KillPod holds a sidecar back
// until the regular container (whose preStop hook takes a while) is
// stopped, and takes the wait out of the sidecar's grace period.
func TestSidecarsStopAfterTheContainersTheyServe(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("order", "busybox:1", func(p *v1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
		sc := p.Spec.Containers[0]
		sc.Name, sc.RestartPolicy = "sc", ptr.To(v1.ContainerRestartPolicyAlways)
		p.Spec.InitContainers = []v1.Container{sc}
		p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 10}}}
	})
	require.NoError(t, e.sync(t, pod, nil).Error(), "the sidecar starts")
	require.NoError(t, e.sync(t, pod, nil).Error(), "then the main container")
	st := e.status(t, pod)
	require.Len(t, st.RunningContainerStatuses(), 2)
	done := make(chan error, 1)
	go func() { done <- e.m.KillPod(e.ctx, pod, st.RunningPod(e.m.Type()), nil) }()
	// Step the clock a second at a time until the kill is over.
	for stepped := false; !stepped; {
		select {
		case err := <-done:
			require.NoError(t, err)
			stepped = true
		case <-time.After(5 * time.Millisecond):
			e.clock.Step(time.Second)
		}
	}
	mainStop, ok := e.srv.StopTimeout(e.srv.ContainerIDs("main")[0])
	require.True(t, ok)
	scStop, ok := e.srv.StopTimeout(e.srv.ContainerIDs("sc")[0])
	require.True(t, ok)
	require.Less(t, mainStop, int64(30), "the hook's time is out of main's grace period")
	require.Less(t, scStop, int64(30), "the sidecar waited for main, out of its grace period")
	require.GreaterOrEqual(t, scStop, int64(2))
}
