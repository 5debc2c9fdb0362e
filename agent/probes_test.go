package agent

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

func execProbe(period int32, cmd ...string) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}},
		PeriodSeconds: period, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
}

func condition(p *v1.Pod, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func events(rec *podconfigtest.Recorder, reason string) []string {
	var out []string
	for _, e := range rec.Events() {
		if e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// settle lets d pass in the bubble and waits for every goroutine.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func TestPodIsReadyOnlyAfterItsReadinessProbePasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, rt, rec := bubbleAgent(t, nil)
		rt.SetExecResult("app", []string{"cat", "/ready"}, fake.ExecResult{ExitCode: 1})
		pod := newPod("ready", v1.RestartPolicyAlways, "app")
		pod.Spec.Containers[0].ReadinessProbe = execProbe(1, "cat", "/ready")
		pod.Spec.Containers[0].ReadinessProbe.FailureThreshold = 2
		a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}

		settle(5 * time.Second)
		p := podOf(a, pod)
		require.Equal(t, v1.PodRunning, p.Status.Phase)
		assert.False(t, p.Status.ContainerStatuses[0].Ready)
		assert.Equal(t, v1.ConditionFalse, condition(p, v1.ContainersReady))
		assert.Equal(t, v1.ConditionFalse, condition(p, v1.PodReady))
		assert.Contains(t, events(rec, "Unhealthy"), "Readiness probe failed: ")

		rt.SetExecResult("app", []string{"cat", "/ready"}, fake.ExecResult{})
		settle(1500 * time.Millisecond)
		p = podOf(a, pod)
		assert.True(t, p.Status.ContainerStatuses[0].Ready)
		assert.Equal(t, v1.ConditionTrue, condition(p, v1.ContainersReady))
		assert.Equal(t, v1.ConditionTrue, condition(p, v1.PodReady))

		// One failure is below the threshold of 2; two make it unready.
		rt.SetExecResult("app", []string{"cat", "/ready"}, fake.ExecResult{ExitCode: 1})
		settle(1 * time.Second)
		assert.Equal(t, v1.ConditionTrue, condition(podOf(a, pod), v1.PodReady))
		settle(1500 * time.Millisecond)
		assert.Equal(t, v1.ConditionFalse, condition(podOf(a, pod), v1.PodReady))
		assert.Equal(t, 0, int(podOf(a, pod).Status.ContainerStatuses[0].RestartCount), "readiness never restarts")
	})
}

func TestReadinessGatesHoldReadyAfterProbesPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _, _ := bubbleAgent(t, nil)
		pod := newPod("gated", v1.RestartPolicyAlways, "app")
		pod.Spec.Containers[0].ReadinessProbe = execProbe(1, "true")
		pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
		a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
		settle(5 * time.Second)
		p := podOf(a, pod)
		assert.Equal(t, v1.ConditionTrue, condition(p, v1.ContainersReady))
		assert.Equal(t, v1.ConditionFalse, condition(p, v1.PodReady))
	})
}

func TestFailingLivenessProbeRestartsTheContainerWithBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, rt, rec := bubbleAgent(t, nil)
		rt.SetExecResult("app", nil, fake.ExecResult{ExitCode: 1, Stdout: "sick"})
		pod := newPod("live", v1.RestartPolicyAlways, "app")
		pod.Spec.Containers[0].LivenessProbe = execProbe(1, "check")
		pod.Spec.Containers[0].LivenessProbe.TerminationGracePeriodSeconds = ptr.To[int64](7)
		a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}

		restarts := func() int32 {
			p := podOf(a, pod)
			if p == nil || len(p.Status.ContainerStatuses) == 0 {
				return 0
			}
			return p.Status.ContainerStatuses[0].RestartCount
		}
		settle(5 * time.Second)
		require.GreaterOrEqual(t, restarts(), int32(1))
		kills := rt.Kills()
		require.NotEmpty(t, kills)
		assert.Equal(t, int64(7), kills[0].GracePeriod, "the probe's terminationGracePeriodSeconds")
		assert.Contains(t, events(rec, "Killing"), "Container app failed liveness probe, will be restarted")
		assert.Contains(t, events(rec, "Unhealthy"), "Liveness probe failed: sick")

		// The restarts slow down: back-off from 10s doubling.
		settle(2 * time.Minute)
		n := restarts()
		assert.GreaterOrEqual(t, n, int32(3))
		assert.LessOrEqual(t, n, int32(8), "restarts not backed off")
		assert.Equal(t, v1.PodRunning, podOf(a, pod).Status.Phase)
	})
}

func TestProbeKillIsOneKillingEventWhenTheRuntimeRecordsEvents(t *testing.T) {
	for _, runtimeRecords := range []bool{false, true} {
		name := map[bool]string{false: "agent records", true: "runtime records"}[runtimeRecords]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := podconfigtest.NewRecorder(0)
				rtc := fake.Config{Clock: clock.RealClock{}}
				if runtimeRecords {
					rtc.Recorder = rec
				}
				rt, err := fake.New(rtc)
				require.NoError(t, err)
				a, _, _ := bubbleAgent(t, func(c *Config) { c.Runtime, c.Recorder = rt, rec })
				rt.SetExecResult("app", nil, fake.ExecResult{ExitCode: 1})
				pod := newPod("once", v1.RestartPolicyAlways, "app")
				pod.Spec.Containers[0].LivenessProbe = execProbe(1, "check")
				a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
				settle(5 * time.Second)
				kills := len(rt.Kills())
				require.NotZero(t, kills)
				killing := events(rec, "Killing")
				require.Len(t, killing, kills, "one Killing event per kill: %q", killing)
				for _, m := range killing {
					require.Equal(t, "Container app failed liveness probe, will be restarted", m)
				}
				if runtimeRecords {
					require.Contains(t, events(rec, "Started"), "Started container app")
				} else {
					require.Empty(t, events(rec, "Started"))
				}
			})
		})
	}
}

func TestLivenessFailureWithRestartPolicyNeverEndsThePod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, rt, rec := bubbleAgent(t, nil)
		rt.SetExecResult("app", nil, fake.ExecResult{ExitCode: 1})
		rt.SetContainerBehavior("app", fake.Behavior{TermExitCode: 143}) // dies of the TERM
		pod := newPod("never", v1.RestartPolicyNever, "app")
		pod.Spec.Containers[0].LivenessProbe = execProbe(1, "check")
		a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
		settle(10 * time.Second)
		assert.Contains(t, events(rec, "Killing"), "Container app failed liveness probe")
		assert.Equal(t, v1.PodFailed, podOf(a, pod).Status.Phase)
		assert.Zero(t, podOf(a, pod).Status.ContainerStatuses[0].RestartCount)
	})
}

func TestStartupProbeGatesStartedAndReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, rt, _ := bubbleAgent(t, nil)
		rt.SetExecResult("app", []string{"started"}, fake.ExecResult{ExitCode: 1})
		pod := newPod("startup", v1.RestartPolicyAlways, "app")
		pod.Spec.Containers[0].StartupProbe = execProbe(1, "started")
		pod.Spec.Containers[0].StartupProbe.FailureThreshold = 30
		pod.Spec.Containers[0].ReadinessProbe = execProbe(1, "ready")
		a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
		settle(5 * time.Second)
		cs := podOf(a, pod).Status.ContainerStatuses[0]
		require.NotNil(t, cs.State.Running)
		assert.False(t, *cs.Started)
		assert.False(t, cs.Ready)

		rt.SetExecResult("app", []string{"started"}, fake.ExecResult{})
		settle(3 * time.Second)
		cs = podOf(a, pod).Status.ContainerStatuses[0]
		assert.True(t, *cs.Started)
		assert.True(t, cs.Ready)
		assert.Zero(t, cs.RestartCount)
	})
}

func TestFailedStartupProbeRestartsTheContainer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, rt, rec := bubbleAgent(t, nil)
		rt.SetExecResult("app", nil, fake.ExecResult{ExitCode: 1})
		pod := newPod("nostart", v1.RestartPolicyAlways, "app")
		pod.Spec.Containers[0].StartupProbe = execProbe(1, "started")
		pod.Spec.Containers[0].StartupProbe.FailureThreshold = 3
		a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
		settle(8 * time.Second)
		assert.Contains(t, events(rec, "Killing"), "Container app failed startup probe, will be restarted")
		assert.GreaterOrEqual(t, podOf(a, pod).Status.ContainerStatuses[0].RestartCount, int32(1))
	})
}

func TestSidecarsAreProbedAndRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, rt, rec := bubbleAgent(t, nil)
		rt.SetExecResult("side", []string{"live"}, fake.ExecResult{ExitCode: 1})
		pod := newPod("sidecar", v1.RestartPolicyAlways, "app")
		pod.Spec.InitContainers = []v1.Container{{Name: "side", Image: "img-side", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
			ReadinessProbe: execProbe(1, "ready"), LivenessProbe: execProbe(1, "live")}}
		a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
		settle(8 * time.Second)
		assert.Contains(t, events(rec, "Killing"), "Init container side failed liveness probe")
		p := podOf(a, pod)
		require.Len(t, p.Status.InitContainerStatuses, 1)
		assert.GreaterOrEqual(t, p.Status.InitContainerStatuses[0].RestartCount, int32(1))
	})
}

func TestSidecarStartupProbeHoldsTheApp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, rt, _ := bubbleAgent(t, nil)
		rt.SetExecResult("side", []string{"started"}, fake.ExecResult{ExitCode: 1})
		pod := newPod("sidestart", v1.RestartPolicyAlways, "app")
		startup := execProbe(1, "started")
		startup.FailureThreshold = 60
		pod.Spec.InitContainers = []v1.Container{{Name: "side", Image: "img-side", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
			StartupProbe: startup}}
		a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
		settle(10 * time.Second)
		p := podOf(a, pod)
		require.Len(t, p.Status.InitContainerStatuses, 1)
		require.NotNil(t, p.Status.InitContainerStatuses[0].State.Running, "the sidecar runs")
		assert.False(t, *p.Status.InitContainerStatuses[0].Started)
		assert.Nil(t, p.Status.ContainerStatuses[0].State.Running, "the app waits for the sidecar's startup probe")
		assert.Equal(t, v1.ConditionFalse, condition(p, v1.PodInitialized))

		rt.SetExecResult("side", []string{"started"}, fake.ExecResult{})
		settle(5 * time.Second)
		p = podOf(a, pod)
		assert.True(t, *p.Status.InitContainerStatuses[0].Started)
		assert.NotNil(t, p.Status.ContainerStatuses[0].State.Running, "the app runs once the sidecar started")
		assert.Equal(t, v1.ConditionTrue, condition(p, v1.PodInitialized))
	})
}

func TestBadProbeLeavesThePodRunningAndUnready(t *testing.T) {
	cases := []struct {
		name  string
		probe *v1.Probe
		want  string
	}{
		{"no handler", &v1.Probe{PeriodSeconds: 1}, "no handler"},
		{"two handlers", &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}},
			GRPC: &v1.GRPCAction{Port: 9}}}, "2 handlers (exec, grpc)"},
		{"negative period", &v1.Probe{PeriodSeconds: -5, ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}},
			"periodSeconds is negative (-5)"},
		{"named port that does not exist", &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{
			HTTPGet: &v1.HTTPGetAction{Port: intstrFromString("metrics")}}}, `port "metrics" not found in container "app"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, _, rec := bubbleAgent(t, nil)
				pod := newPod("bad", v1.RestartPolicyAlways, "app")
				pod.Spec.Containers[0].ReadinessProbe = tc.probe
				pod.Spec.Containers[0].LivenessProbe = tc.probe
				a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
				settle(30 * time.Second)
				p := podOf(a, pod)
				require.Equal(t, v1.PodRunning, p.Status.Phase)
				assert.False(t, p.Status.ContainerStatuses[0].Ready)
				assert.Zero(t, p.Status.ContainerStatuses[0].RestartCount, "a probe that cannot run restarts nothing")
				found := false
				for _, m := range events(rec, "Unhealthy") {
					if strings.HasPrefix(m, "Readiness probe errored and resulted in unknown state: ") && strings.Contains(m, tc.want) {
						found = true
					}
				}
				assert.True(t, found, "no Unhealthy event with %q in %v", tc.want, events(rec, "Unhealthy"))
			})
		})
	}
}

func TestDeletedPodStopsItsProbeWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _, _ := bubbleAgent(t, nil)
		pod := newPod("gone", v1.RestartPolicyAlways, "app")
		pod.Spec.Containers[0].ReadinessProbe = execProbe(1, "ready")
		pod.Spec.Containers[0].LivenessProbe = execProbe(1, "live")
		a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
		settle(3 * time.Second)
		require.Equal(t, 2, a.Prober().Workers())
		a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET}
		settle(10 * time.Second)
		assert.Zero(t, a.Prober().Workers())
	})
}

func intstrFromString(s string) intstr.IntOrString { return intstr.FromString(s) }

// containerKiller is runtime/fake with a KillContainer: it records which
// containers were stopped through it and which pod kills came through
// KillPod, whose end of the pod a real runtime may act on.
type containerKiller struct {
	*fake.Runtime
	mu       sync.Mutex
	one      []string
	podKills int
}

func (k *containerKiller) KillContainer(ctx context.Context, pod *v1.Pod, c runtime.Container, grace *int64) error {
	k.mu.Lock()
	k.one = append(k.one, c.Name)
	k.mu.Unlock()
	one := runtime.Pod{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace, Containers: []*runtime.Container{&c}}
	return k.Runtime.KillPod(ctx, pod, one, grace)
}

func (k *containerKiller) KillPod(ctx context.Context, pod *v1.Pod, rp runtime.Pod, grace *int64) error {
	k.mu.Lock()
	k.podKills++
	k.mu.Unlock()
	return k.Runtime.KillPod(ctx, pod, rp, grace)
}

func TestProbeKillsGoThroughKillContainerAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var k *containerKiller
		a, rt, _ := bubbleAgent(t, func(c *Config) {
			k = &containerKiller{Runtime: c.Runtime.(*fake.Runtime)}
			c.Runtime = k
		})
		rt.SetExecResult("side", []string{"live"}, fake.ExecResult{ExitCode: 1})
		rt.SetExecResult("app", []string{"live"}, fake.ExecResult{ExitCode: 1})
		pod := newPod("killone", v1.RestartPolicyAlways, "app")
		pod.Spec.Containers[0].LivenessProbe = execProbe(1, "live")
		pod.Spec.InitContainers = []v1.Container{{Name: "side", Image: "img-side", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
			LivenessProbe: execProbe(1, "live")}}
		a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
		settle(8 * time.Second)

		k.mu.Lock()
		one, podKills := slices.Clone(k.one), k.podKills
		k.mu.Unlock()
		assert.Contains(t, one, "side", "the sidecar is killed alone")
		assert.Contains(t, one, "app", "the app is killed alone")
		assert.Zero(t, podKills, "no probe kill may end the pod")
		p := podOf(a, pod)
		require.Len(t, p.Status.InitContainerStatuses, 1)
		assert.GreaterOrEqual(t, p.Status.InitContainerStatuses[0].RestartCount, int32(1))
		assert.Equal(t, v1.PodRunning, p.Status.Phase)
	})
}
