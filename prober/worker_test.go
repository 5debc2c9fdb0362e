package prober

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
)

const hang = -1

func TestThresholds(t *testing.T) {
	const U, S, F = Unknown, Success, Failure
	cases := []struct {
		name  string
		typ   ProbeType
		probe func(*v1.Probe)
		codes []int    // exit code of each probe run, one per period
		want  []Result // result after each run
	}{
		{"readiness is false until the first success", Readiness, nil,
			[]int{1, 1, 0}, []Result{F, F, S}},
		{"readiness needs successThreshold successes in a row", Readiness, func(p *v1.Probe) { p.SuccessThreshold = 2 },
			[]int{0, 1, 0, 0}, []Result{F, F, F, S}},
		{"readiness turns false after failureThreshold failures in a row", Readiness, func(p *v1.Probe) { p.FailureThreshold = 2 },
			[]int{0, 1, 0, 1, 1}, []Result{S, S, S, S, F}},
		{"liveness stays successful until failureThreshold failures in a row", Liveness, func(p *v1.Probe) { p.FailureThreshold = 3 },
			[]int{1, 1, 0, 1, 1, 1}, []Result{S, S, S, S, S, F}},
		{"failureThreshold defaults to 3", Liveness, nil,
			[]int{1, 1, 1}, []Result{S, S, F}},
		{"startup is unknown until its verdict", Startup, func(p *v1.Probe) { p.FailureThreshold = 2 },
			[]int{1, 1}, []Result{U, F}},
		{"startup succeeds after failures below the threshold", Startup, func(p *v1.Probe) { p.FailureThreshold = 3 },
			[]int{1, 1, 0}, []Result{U, U, S}},
		{"a command past its timeout is a failure", Liveness, func(p *v1.Probe) { p.FailureThreshold = 1 },
			[]int{hang}, []Result{F}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withEnv(t, func(e *env) {
				p := execProbe("check")
				if tc.probe != nil {
					tc.probe(p)
				}
				c := v1.Container{Name: "app"}
				switch tc.typ {
				case Liveness:
					c.LivenessProbe = p
				case Readiness:
					c.ReadinessProbe = p
				case Startup:
					c.StartupProbe = p
				}
				pod := podWith("u1", c)
				e.running(pod, "app", "fake://c1", 0, tc.typ != Startup)
				for i, code := range tc.codes {
					e.runner.setCode("check", code)
					e.runner.mu.Lock()
					e.runner.hang["check"] = code == hang
					e.runner.mu.Unlock()
					if i == 0 {
						e.m.AddPod(pod)
						time.Sleep(0) // let AddPod's worker run
					} else {
						e.step(time.Second)
					}
					e.step(0)
					if got := e.result(tc.typ, "fake://c1"); got != tc.want[i] {
						t.Fatalf("after probe %d (exit %d): result %v, want %v", i+1, code, got, tc.want[i])
					}
				}
			})
		})
	}
}

func TestNoProbeBeforeInitialDelay(t *testing.T) {
	withEnv(t, func(e *env) {
		p := execProbe("check")
		p.InitialDelaySeconds = 5
		pod := podWith("u1", v1.Container{Name: "app", ReadinessProbe: p})
		e.running(pod, "app", "fake://c1", 0, true)
		e.m.AddPod(pod)
		e.step(0)
		for i := 0; i < 4; i++ {
			e.step(time.Second)
		}
		if n := e.runner.called("check"); n != 0 {
			t.Fatalf("probed %d times before the initial delay", n)
		}
		if got := e.result(Readiness, "fake://c1"); got != Failure {
			t.Fatalf("readiness %v during the initial delay, want Failure", got)
		}
		e.step(time.Second)
		if got := e.result(Readiness, "fake://c1"); got != Success {
			t.Fatalf("readiness %v after the initial delay, want Success", got)
		}
	})
}

func TestStartupGatesLivenessAndReadiness(t *testing.T) {
	withEnv(t, func(e *env) {
		e.runner.setCode("startup", 1)
		pod := podWith("u1", v1.Container{Name: "app", StartupProbe: execProbe("startup"),
			LivenessProbe: execProbe("live"), ReadinessProbe: execProbe("ready")})
		e.running(pod, "app", "fake://c1", 0, false)
		e.m.AddPod(pod)
		e.step(0)
		e.step(time.Second)
		if e.runner.called("startup") == 0 || e.runner.called("live") != 0 || e.runner.called("ready") != 0 {
			t.Fatalf("before start: startup %d, liveness %d, readiness %d probes; want only startup",
				e.runner.called("startup"), e.runner.called("live"), e.runner.called("ready"))
		}
		e.runner.setCode("startup", 0)
		e.step(time.Second)
		if got := e.result(Startup, "fake://c1"); got != Success {
			t.Fatalf("startup %v, want Success", got)
		}
		// The agent reports Started from the startup verdict.
		e.running(pod, "app", "fake://c1", 2*time.Second, true)
		n := e.runner.called("startup")
		e.step(time.Second)
		e.step(time.Second)
		if e.runner.called("live") == 0 || e.runner.called("ready") == 0 {
			t.Fatal("liveness and readiness not probed once started")
		}
		if e.runner.called("startup") != n {
			t.Fatal("startup probed again after its success")
		}
		if got := e.result(Readiness, "fake://c1"); got != Success {
			t.Fatalf("readiness %v, want Success", got)
		}
	})
}

func TestRestartedContainerGetsFreshWorkerState(t *testing.T) {
	withEnv(t, func(e *env) {
		p := execProbe("live")
		p.FailureThreshold = 1
		e.runner.setCode("live", 1)
		pod := podWith("u1", v1.Container{Name: "app", LivenessProbe: p})
		e.running(pod, "app", "fake://c1", 0, true)
		e.m.AddPod(pod)
		e.step(0)
		if got := e.result(Liveness, "fake://c1"); got != Failure {
			t.Fatalf("liveness %v, want Failure", got)
		}
		n := e.runner.called("live")
		e.step(time.Second)
		e.step(time.Second)
		if e.runner.called("live") != n {
			t.Fatal("a container that failed liveness was probed again before its restart")
		}
		e.runner.setCode("live", 0)
		e.running(pod, "app", "fake://c2", 0, true)
		e.step(time.Second)
		if got := e.result(Liveness, "fake://c1"); got != 255 {
			t.Fatalf("result of the old instance kept: %v", got)
		}
		if got := e.result(Liveness, "fake://c2"); got != Success {
			t.Fatalf("liveness of the new instance %v, want Success", got)
		}
		if e.runner.called("live") == n {
			t.Fatal("the new instance is not probed")
		}
	})
}

func TestWorkersStop(t *testing.T) {
	cases := []struct {
		name string
		stop func(e *env, pod *v1.Pod)
	}{
		{"pod removal stops every worker", func(e *env, pod *v1.Pod) { e.m.RemovePod(pod.UID) }},
		{"cleanup stops workers of pods not kept", func(e *env, pod *v1.Pod) { e.m.CleanupPods(map[types.UID]bool{"other": true}) }},
		{"a terminal pod stops its workers", func(e *env, pod *v1.Pod) {
			e.status.set(pod.UID, v1.PodStatus{Phase: v1.PodSucceeded})
			e.step(time.Second)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withEnv(t, func(e *env) {
				pod := podWith("u1", v1.Container{Name: "app", LivenessProbe: execProbe("live"),
					ReadinessProbe: execProbe("ready"), StartupProbe: execProbe("start")})
				e.running(pod, "app", "fake://c1", 0, true)
				e.m.AddPod(pod)
				e.step(0)
				if n := e.m.Workers(); n != 3 {
					t.Fatalf("%d workers, want 3", n)
				}
				tc.stop(e, pod)
				e.step(0)
				if n := e.m.Workers(); n != 0 {
					t.Fatalf("%d workers left", n)
				}
				if got := e.result(Readiness, "fake://c1"); got != 255 {
					t.Fatalf("readiness result kept after stop: %v", got)
				}
			})
		})
	}
}

func TestStopLivenessAndStartupKeepsReadiness(t *testing.T) {
	withEnv(t, func(e *env) {
		pod := podWith("u1", v1.Container{Name: "app", LivenessProbe: execProbe("live"), ReadinessProbe: execProbe("ready")})
		e.running(pod, "app", "fake://c1", 0, true)
		e.m.AddPod(pod)
		e.step(0)
		e.m.StopLivenessAndStartup(pod)
		e.step(0)
		if n := e.m.Workers(); n != 1 {
			t.Fatalf("%d workers, want the readiness one", n)
		}
	})
}

func TestReadyTriggersAProbe(t *testing.T) {
	withEnv(t, func(e *env) {
		e.runner.setCode("ready", 1)
		pod := podWith("u1", v1.Container{Name: "app", ReadinessProbe: execProbe("ready")})
		e.running(pod, "app", "fake://c1", 0, true)
		e.m.AddPod(pod)
		e.step(0)
		e.runner.setCode("ready", 0)
		if e.m.Ready(pod.UID, "app", "fake://c1") {
			t.Fatal("ready before a successful probe")
		}
		e.step(0) // no time passes
		if !e.m.Ready(pod.UID, "app", "fake://c1") {
			t.Fatal("Ready did not trigger a probe")
		}
	})
}

// TriggerReadiness, asked once the status shows the container running,
// probes at once: the worker reads the container from the stored status.
func TestTriggerReadinessProbesTheStoredContainerNow(t *testing.T) {
	withEnv(t, func(e *env) {
		pod := podWith("u1", v1.Container{Name: "app", ReadinessProbe: execProbe("ready")})
		e.m.AddPod(pod)
		e.step(0) // the worker finds no container yet
		e.running(pod, "app", "fake://c1", 0, true)
		e.m.TriggerReadiness(pod.UID, "app")
		e.m.TriggerReadiness(pod.UID, "other") // no such worker: nothing
		e.step(0)                              // no time passes
		if r, _ := e.m.Result(Readiness, runtime.ContainerID{Type: "fake", ID: "c1"}); r != Success {
			t.Fatalf("readiness %v after TriggerReadiness, want Success without waiting a period", r)
		}
	})
}

func TestSidecarsAreProbed(t *testing.T) {
	withEnv(t, func(e *env) {
		always := v1.ContainerRestartPolicyAlways
		pod := podWith("u1", v1.Container{Name: "app"})
		pod.Spec.InitContainers = []v1.Container{
			{Name: "init", ReadinessProbe: execProbe("init")},
			{Name: "side", RestartPolicy: &always, ReadinessProbe: execProbe("side")},
		}
		st := true
		e.status.set(pod.UID, v1.PodStatus{Phase: v1.PodRunning, InitContainerStatuses: []v1.ContainerStatus{{
			Name: "side", ContainerID: "fake://s1", Started: &st,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(e.clk.Now())}},
		}}})
		e.m.AddPod(pod)
		e.step(0)
		if n := e.m.Workers(); n != 1 {
			t.Fatalf("%d workers, want one for the sidecar only", n)
		}
		if got := e.result(Readiness, "fake://s1"); got != Success {
			t.Fatalf("sidecar readiness %v, want Success", got)
		}
	})
}

func TestBadProbesErrorClearly(t *testing.T) {
	cases := []struct {
		name  string
		probe *v1.Probe
		want  string
	}{
		{"no handler", &v1.Probe{PeriodSeconds: 1}, "no handler: set one of exec, httpGet, tcpSocket or grpc"},
		{"two handlers", &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}},
			TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}}, "2 handlers (exec, tcpSocket): set exactly one"},
		{"negative period", &v1.Probe{PeriodSeconds: -1, ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}},
			"periodSeconds is negative (-1)"},
		{"named port that does not exist", &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{
			TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("web")}}}, `port "web" not found in container "app"`},
		{"negative termination grace period", &v1.Probe{PeriodSeconds: 1, TerminationGracePeriodSeconds: ptr.To[int64](-1),
			ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}}, "terminationGracePeriodSeconds must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withEnv(t, func(e *env) {
				pod := podWith("u1", v1.Container{Name: "app", ReadinessProbe: tc.probe})
				e.running(pod, "app", "fake://c1", 0, true)
				e.m.AddPod(pod)
				e.step(0)
				e.step(10 * time.Second)
				if got := e.result(Readiness, "fake://c1"); got != Failure {
					t.Fatalf("readiness %v, want Failure", got)
				}
				evs := e.rec.list()
				if len(evs) == 0 {
					t.Fatal("no event")
				}
				ev := evs[0]
				if ev.reason != ReasonUnhealthy || !strings.HasPrefix(ev.message, "Readiness probe errored and resulted in unknown state: ") ||
					!strings.Contains(ev.message, tc.want) || ev.fieldPath != "spec.containers{app}" {
					t.Fatalf("event %+v, want Unhealthy with %q", ev, tc.want)
				}
			})
		})
	}
}

func TestFailureEvents(t *testing.T) {
	withEnv(t, func(e *env) {
		e.runner.setCode("live", 3)
		pod := podWith("u1", v1.Container{Name: "app", LivenessProbe: execProbe("live")})
		e.running(pod, "app", "fake://c1", 0, true)
		e.m.AddPod(pod)
		e.step(0)
		evs := e.rec.list()
		if len(evs) != 1 || evs[0].reason != ReasonUnhealthy || evs[0].message != "Liveness probe failed: out" {
			t.Fatalf("events %+v", evs)
		}
	})
}

func TestExpandCommand(t *testing.T) {
	env := []v1.EnvVar{{Name: "PORT", Value: "8080"}, {Name: "SECRET", ValueFrom: &v1.EnvVarSource{}}}
	got := expandCommand([]string{"curl", "localhost:$(PORT)/$(SECRET)/$(NONE)", "$$(PORT)", "a$b", "$(PORT"}, env)
	want := []string{"curl", "localhost:8080//$(NONE)", "$(PORT)", "a$b", "$(PORT"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("arg %d: %q, want %q", i, got[i], want[i])
		}
	}
}

func TestExpandCommandGivesValueFromVariablesTheirEmptyValue(t *testing.T) {
	from := &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{Key: "k"}}
	cases := []struct {
		name string
		env  []v1.EnvVar
		want string
	}{
		{"a valueFrom variable expands to nothing", []v1.EnvVar{{Name: "TOKEN", ValueFrom: from}}, "t="},
		{"a later valueFrom entry of a name wins", []v1.EnvVar{{Name: "TOKEN", Value: "a"}, {Name: "TOKEN", ValueFrom: from}}, "t="},
		{"a later static entry of a name wins", []v1.EnvVar{{Name: "TOKEN", ValueFrom: from}, {Name: "TOKEN", Value: "b"}}, "t=b"},
		{"an undeclared name stays", nil, "t=$(TOKEN)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := expandCommand([]string{"t=$(TOKEN)"}, tc.env)[0]; got != tc.want {
				t.Fatalf("%q, want %q", got, tc.want)
			}
		})
	}
}

// gateRunner blocks every command until released and counts how many run
// at once.
type gateRunner struct {
	mu            sync.Mutex
	running, peak int
	release       chan struct{}
}

func (g *gateRunner) ExecSync(ctx context.Context, _ runtime.ContainerID, _ []string, _ time.Duration) ([]byte, []byte, int, error) {
	g.mu.Lock()
	g.running++
	g.peak = max(g.peak, g.running)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.running--
		g.mu.Unlock()
	}()
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, nil, 0, ctx.Err()
	}
	return nil, nil, 0, nil
}

func TestProbesRunAtMostMaxConcurrentAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		st := &fakeStatus{m: map[types.UID]*v1.PodStatus{}}
		g := &gateRunner{release: make(chan struct{})}
		m, err := New(Config{Status: st, Runner: g, Clock: clk, MaxConcurrent: 2, Jitter: func(time.Duration) time.Duration { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = m.Run(ctx) }()
		yes := true
		for i := 0; i < 5; i++ {
			pod := podWith(fmt.Sprintf("u%d", i), v1.Container{Name: "app", ReadinessProbe: execProbe("x")})
			st.set(pod.UID, v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "app",
				ContainerID: fmt.Sprintf("fake://c%d", i), Started: &yes,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(clk.Now())}}}}})
			m.AddPod(pod)
		}
		synctest.Wait()
		if g.running != 2 {
			t.Fatalf("%d probes running, want MaxConcurrent=2", g.running)
		}
		for i := 0; i < 5; i++ {
			g.release <- struct{}{}
		}
		synctest.Wait()
		if g.peak != 2 || g.running != 0 {
			t.Fatalf("peak %d running %d; want peak 2 and all done", g.peak, g.running)
		}
		cancel()
		<-done
	})
}

// hangingTransport answers no HTTP request: each waits for its context.
type hangingTransport struct{}

func (hangingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

func TestAProbeCutShortByItsWorkersStopGivesNoVerdict(t *testing.T) {
	cases := []struct {
		name string
		stop func(m *Manager, pod *v1.Pod)
	}{
		{"the pod starts terminating", func(m *Manager, pod *v1.Pod) { m.StopLivenessAndStartup(pod) }},
		{"the pod is removed", func(m *Manager, pod *v1.Pod) { m.RemovePod(pod.UID) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withEnv(t, func(e *env) {
				p := &v1.Probe{PeriodSeconds: 1, TimeoutSeconds: 10, FailureThreshold: 1,
					ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(80)}}}
				pod := podWith("u1", v1.Container{Name: "app", LivenessProbe: p})
				e.running(pod, "app", "fake://c1", 0, true)
				e.m.AddPod(pod)
				e.step(0) // the probe is under way
				tc.stop(e.m, pod)
				e.step(0)
				if n := e.m.Workers(); n != 0 {
					t.Fatalf("%d workers left", n)
				}
				for _, u := range e.received() {
					if u.Type == Liveness && u.Result == Failure {
						t.Fatalf("liveness failure reported for a probe cut short: %+v", u)
					}
				}
				if evs := e.rec.list(); len(evs) != 0 {
					t.Fatalf("events for a probe cut short: %+v", evs)
				}
			}, func(c *Config) { c.Transport = hangingTransport{} })
		})
	}
}

// stuckRunner runs commands that never end, in a runtime that does not
// enforce the timeout: ExecSync returns only once its context ends.
type stuckRunner struct {
	mu    sync.Mutex
	calls int
	err   func(ctx context.Context) error
}

func (s *stuckRunner) ExecSync(ctx context.Context, _ runtime.ContainerID, _ []string, _ time.Duration) ([]byte, []byte, int, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	<-ctx.Done()
	return nil, nil, 0, s.err(ctx)
}

func TestAnExecProbeOutlivingTheProbersBoundTimesOut(t *testing.T) {
	cases := []struct {
		name string
		err  func(ctx context.Context) error
	}{
		{"the runtime returns the context's error", func(ctx context.Context) error { return ctx.Err() }},
		{"the runtime returns an error of its own", func(context.Context) error { return errors.New("rpc error: code = Unknown") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &stuckRunner{err: tc.err}
			withEnv(t, func(e *env) {
				p := execProbe("check")
				p.FailureThreshold = 1
				pod := podWith("u1", v1.Container{Name: "app", LivenessProbe: p})
				e.running(pod, "app", "fake://c1", 0, true)
				e.m.AddPod(pod)
				e.step(0)
				time.Sleep(time.Second + 2*time.Minute + time.Second) // past the prober's bound: timeout + 2 minutes
				synctest.Wait()
				if got := e.result(Liveness, "fake://c1"); got != Failure {
					t.Errorf("liveness %v, want Failure", got)
				}
				r.mu.Lock()
				defer r.mu.Unlock()
				if r.calls != 1 {
					t.Errorf("command run %d times, want once", r.calls)
				}
				if evs := e.rec.list(); len(evs) != 1 || !strings.Contains(evs[0].message, `probe failed: command "check" timed out`) {
					t.Errorf("events %+v, want one saying the command timed out", evs)
				}
			}, func(c *Config) { c.Runner = r })
		})
	}
}

// A new container instance's initial result is in the results cache but
// not an update: while readiness keeps failing nothing is sent (the
// status already says not ready), and the first success is the one
// update, so a pod syncs once for it, not once or twice as the results
// pump happens to run.
func TestInitialResultIsNoUpdate(t *testing.T) {
	for _, typ := range []ProbeType{Readiness, Liveness, Startup} {
		t.Run(typ.String(), func(t *testing.T) {
			withEnv(t, func(e *env) {
				p := execProbe("check")
				p.FailureThreshold = 10 // no verdict from the failures below
				c := v1.Container{Name: "app"}
				switch typ {
				case Readiness:
					c.ReadinessProbe = p
				case Liveness:
					c.LivenessProbe = p
				case Startup:
					c.StartupProbe = p
				}
				pod := podWith("u1", c)
				e.running(pod, "app", "fake://c1", 0, typ != Startup)
				e.runner.setCode("check", 1)
				e.m.AddPod(pod)
				e.step(0)
				e.step(time.Second)
				if typ == Readiness && e.result(typ, "fake://c1") != Failure {
					t.Fatalf("readiness %v before a verdict, want Failure", e.result(typ, "fake://c1"))
				}
				if got := e.received(); len(got) != 0 {
					t.Fatalf("updates before a verdict: %v", got)
				}
				if typ == Liveness {
					return // its first verdict would be a failure
				}
				e.runner.setCode("check", 0)
				e.step(time.Second)
				e.step(0)
				got := e.received()
				if len(got) != 1 || got[0].Result != Success || got[0].Type != typ {
					t.Fatalf("updates after the first success: %v, want one %v Success", got, typ)
				}
			})
		})
	}
}

func TestOnUpdateGetsTheChangesInsteadOfTheStream(t *testing.T) {
	var mu sync.Mutex
	var got []Update
	onUpdate := func(c *Config) {
		c.OnUpdate = func(_ context.Context, u Update) { mu.Lock(); got = append(got, u); mu.Unlock() }
	}
	withEnv(t, func(e *env) {
		p := execProbe("check")
		pod := podWith("u1", v1.Container{Name: "app", ReadinessProbe: p})
		e.running(pod, "app", "fake://c1", 0, true)
		e.runner.setCode("check", 0)
		e.m.AddPod(pod)
		time.Sleep(0) // let AddPod's worker run
		e.step(0)
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 || got[0].Type != Readiness || got[0].Result != Success {
			t.Fatalf("OnUpdate got %+v, want one readiness success", got)
		}
		if r := e.received(); len(r) != 0 {
			t.Errorf("the Updates stream carried %+v besides OnUpdate", r)
		}
	}, onUpdate)
}
