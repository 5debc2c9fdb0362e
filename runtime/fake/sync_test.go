package fake_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

func TestNew(t *testing.T) {
	rt, err := fake.New(fake.Config{})
	require.NoError(t, err)
	assert.Equal(t, "fake", rt.Type())
	v, err := rt.Version(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "0.1.0", v)
	st, err := rt.Status(context.Background())
	require.NoError(t, err)
	assert.True(t, st.Ready(), "a new runtime is ready")

	bad := []struct {
		name string
		cfg  fake.Config
	}{
		{"failure rate above one", fake.Config{FailureRates: map[string]float64{"GetPods": 1.5}}},
		{"negative failure rate", fake.Config{FailureRates: map[string]float64{"GetPods": -0.1}}},
		{"failure rate for an unknown method", fake.Config{FailureRates: map[string]float64{"Frobnicate": 0.5}}},
		{"negative pull back-off", fake.Config{ImagePullBackoffInitial: -time.Second}},
	}
	for _, tt := range bad {
		t.Run(tt.name+" is rejected", func(t *testing.T) {
			_, err := fake.New(tt.cfg)
			assert.ErrorIs(t, err, runtime.ErrInvalidConfig)
		})
	}
	assert.ErrorIs(t, rt.SetLatency("Nope", time.Second), runtime.ErrInvalidConfig)
}

func TestSyncPodStartsNewPod(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{RuntimeType: "test"})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"), ctr("log"))
	res := sync(t, rt, pod, nil)
	require.NoError(t, res.Error())
	assert.Equal(t, []string{"CreatePodSandbox uid-web", "StartContainer app", "StartContainer log"}, steps(res))

	st := status(t, rt, pod)
	require.Len(t, st.SandboxStatuses, 1)
	sb := st.SandboxStatuses[0]
	assert.Equal(t, runtime.SandboxStateReady, sb.State)
	assert.Equal(t, st.IPs, sb.IPs)
	assert.NotEmpty(t, st.IPs, "a pod-network pod gets an IP")
	require.Len(t, st.ContainerStatuses, 2)
	for _, cs := range st.ContainerStatuses {
		assert.Equal(t, runtime.ContainerStateRunning, cs.State)
		assert.Equal(t, "test", cs.ID.Type)
		assert.Equal(t, sb.ID, cs.SandboxID)
		_, err := runtime.ParseContainerID(cs.ID.String())
		assert.NoError(t, err)
	}
	app := st.FindContainerStatusByName("app")
	assert.Equal(t, runtime.HashContainer(&pod.Spec.Containers[0]), app.Hash)
	assert.Equal(t, "app:1", app.Image)
	assert.Equal(t, t0, app.StartedAt)

	res = sync(t, rt, pod, nil)
	assert.Empty(t, res.SyncResults, "a pod at its spec needs nothing")
}

func TestSyncPodRestartPolicy(t *testing.T) {
	tests := []struct {
		name     string
		policy   v1.RestartPolicy
		exits    bool
		code     int
		restart  bool
		podDone  bool // nothing left to run: the sandbox is stopped
		wantTail []string
	}{
		{name: "Always restarts a container that succeeded", policy: v1.RestartPolicyAlways, exits: true, code: 0, restart: true},
		{name: "Always restarts a container that failed", policy: v1.RestartPolicyAlways, exits: true, code: 2, restart: true},
		{name: "OnFailure restarts a container that failed", policy: v1.RestartPolicyOnFailure, exits: true, code: 2, restart: true},
		{name: "OnFailure keeps a succeeded container down and stops the pod", policy: v1.RestartPolicyOnFailure, exits: true, code: 0, podDone: true},
		{name: "Never keeps a failed container down and stops the pod", policy: v1.RestartPolicyNever, exits: true, code: 2, podDone: true},
		{name: "Never keeps a succeeded container down and stops the pod", policy: v1.RestartPolicyNever, exits: true, code: 0, podDone: true},
		{name: "running container is left alone under Always", policy: v1.RestartPolicyAlways},
		{name: "running container is left alone under Never", policy: v1.RestartPolicyNever},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, clk := newRuntime(t, fake.Config{})
			if tt.exits {
				rt.SetImageBehavior("app:1", fake.Behavior{Exit: true, ExitAfter: time.Minute, ExitCode: tt.code})
			}
			pod := newPod("web", tt.policy, ctr("app"))
			require.NoError(t, sync(t, rt, pod, nil).Error())
			assert.Equal(t, runtime.ContainerStateRunning, newest(t, rt, pod, "app").State)

			clk.Step(time.Minute - time.Nanosecond)
			assert.Equal(t, runtime.ContainerStateRunning, newest(t, rt, pod, "app").State, "not before its time")
			clk.Step(time.Nanosecond)
			app := newest(t, rt, pod, "app")
			if tt.exits {
				assert.Equal(t, runtime.ContainerStateExited, app.State)
				assert.Equal(t, tt.code, app.ExitCode)
				assert.Equal(t, t0.Add(time.Minute), app.FinishedAt)
				assert.Equal(t, map[bool]string{true: "Completed", false: "Error"}[tt.code == 0], app.Reason)
			} else {
				assert.Equal(t, runtime.ContainerStateRunning, app.State)
			}

			res := sync(t, rt, pod, nil)
			require.NoError(t, res.Error())
			st := status(t, rt, pod)
			app = st.FindContainerStatusByName("app")
			switch {
			case tt.restart:
				assert.Equal(t, []string{"StartContainer app"}, steps(res))
				assert.Equal(t, runtime.ContainerStateRunning, app.State)
				assert.Equal(t, 1, app.RestartCount)
				assert.Len(t, st.ContainerStatuses, 2, "the exited instance stays until GC")
			case tt.podDone:
				assert.Equal(t, []string{"KillPodSandbox uid-web"}, steps(res))
				assert.Equal(t, runtime.SandboxStateNotReady, st.SandboxStatuses[0].State)
				assert.Equal(t, runtime.ContainerStateExited, app.State)
				assert.Empty(t, sync(t, rt, pod, nil).SyncResults, "a finished pod stays finished")
			default:
				assert.Empty(t, res.SyncResults)
			}
		})
	}
}

func TestSyncPodInitContainersRunOneAtATime(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{})
	rt.SetContainerBehavior("init0", fake.Behavior{Exit: true, ExitAfter: 10 * time.Second})
	rt.SetContainerBehavior("init1", fake.Behavior{Exit: true, ExitAfter: 10 * time.Second})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
	pod.Spec.InitContainers = []v1.Container{ctr("init0"), ctr("init1")}

	res := sync(t, rt, pod, nil)
	require.NoError(t, res.Error())
	assert.Equal(t, []string{"CreatePodSandbox uid-web", "InitContainer init0"}, steps(res))
	assert.Empty(t, sync(t, rt, pod, nil).SyncResults, "the running init container is awaited")

	clk.Step(10 * time.Second)
	assert.Equal(t, []string{"InitContainer init1"}, steps(sync(t, rt, pod, nil)))
	assert.Nil(t, newest(t, rt, pod, "app"), "app waits for the last init container")

	clk.Step(10 * time.Second)
	assert.Equal(t, []string{"StartContainer app"}, steps(sync(t, rt, pod, nil)))
	st := status(t, rt, pod)
	assert.Equal(t, runtime.ContainerStateRunning, st.FindContainerStatusByName("app").State)
	assert.Equal(t, runtime.ContainerStateExited, st.FindContainerStatusByName("init0").State)
	assert.Equal(t, runtime.ContainerStateExited, st.FindContainerStatusByName("init1").State)
}

func TestSyncPodFailedInitContainer(t *testing.T) {
	tests := []struct {
		name   string
		policy v1.RestartPolicy
		want   []string
	}{
		{"failed init container is restarted under Always", v1.RestartPolicyAlways, []string{"InitContainer init0"}},
		{"failed init container is restarted under OnFailure", v1.RestartPolicyOnFailure, []string{"InitContainer init0"}},
		{"failed init container under Never fails the pod", v1.RestartPolicyNever, []string{"KillPodSandbox uid-web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, clk := newRuntime(t, fake.Config{})
			rt.SetContainerBehavior("init0", fake.Behavior{Exit: true, ExitAfter: time.Second, ExitCode: 1})
			pod := newPod("web", tt.policy, ctr("app"))
			pod.Spec.InitContainers = []v1.Container{ctr("init0")}
			require.NoError(t, sync(t, rt, pod, nil).Error())
			clk.Step(time.Second)
			assert.Equal(t, tt.want, steps(sync(t, rt, pod, nil)))
			assert.Nil(t, newest(t, rt, pod, "app"), "app never starts")
		})
	}
}

func TestSyncPodSidecars(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{})
	rt.SetContainerBehavior("setup", fake.Behavior{Exit: true, ExitAfter: 5 * time.Second})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
	pod.Spec.InitContainers = []v1.Container{sidecar("proxy"), ctr("setup")}

	assert.Equal(t, []string{"CreatePodSandbox uid-web", "InitContainer proxy"}, steps(sync(t, rt, pod, nil)))
	assert.Equal(t, []string{"InitContainer setup"}, steps(sync(t, rt, pod, nil)), "a running sidecar lets the next init container start")
	clk.Step(5 * time.Second)
	assert.Equal(t, []string{"StartContainer app"}, steps(sync(t, rt, pod, nil)))

	require.NoError(t, rt.ExitContainer(pod.UID, "proxy", 1, ""))
	res := sync(t, rt, pod, nil)
	assert.Equal(t, []string{"InitContainer proxy"}, steps(res), "an exited sidecar is restarted, the app stays")
	assert.Equal(t, 1, newest(t, rt, pod, "proxy").RestartCount)
	assert.Equal(t, 0, newest(t, rt, pod, "app").RestartCount)

	// The app finishing under OnFailure finishes the pod; the sidecar does
	// not keep it alive and stops after the app.
	pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	require.NoError(t, rt.ExitContainer(pod.UID, "app", 0, ""))
	rt.ResetCalls()
	assert.Equal(t, []string{"KillContainer proxy", "KillPodSandbox uid-web"}, steps(sync(t, rt, pod, nil)))
	assert.Equal(t, runtime.ContainerStateExited, newest(t, rt, pod, "proxy").State)
}

func TestKillPodStopsSidecarsLast(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"), ctr("web"))
	pod.Spec.InitContainers = []v1.Container{sidecar("proxy"), sidecar("metrics")}
	rt.AddRunningPod(pod)
	pods, err := rt.GetPods(context.Background(), false)
	require.NoError(t, err)
	require.Len(t, pods, 1)
	require.NoError(t, rt.KillPod(context.Background(), pod, *pods[0], nil))
	var names []string
	for _, k := range rt.Kills() {
		names = append(names, k.Name)
	}
	assert.Equal(t, []string{"app", "web", "metrics", "proxy"}, names)
	pods, err = rt.GetPods(context.Background(), false)
	require.NoError(t, err)
	assert.Empty(t, pods, "nothing runs after KillPod")
}

func TestKillPodGracePeriod(t *testing.T) {
	tests := []struct {
		name      string
		spec      *int64
		deletion  *int64
		override  *int64
		wantGrace int64
	}{
		{name: "spec grace period", spec: ptr.To[int64](20), wantGrace: 20},
		{name: "deletion grace period beats the spec", spec: ptr.To[int64](20), deletion: ptr.To[int64](5), wantGrace: 5},
		{name: "override beats everything", spec: ptr.To[int64](20), deletion: ptr.To[int64](5), override: ptr.To[int64](2), wantGrace: 2},
		{name: "no grace period anywhere gives the default", wantGrace: 30},
		{name: "zero override still gives one second", override: ptr.To[int64](0), wantGrace: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt, clk := newRuntime(t, fake.Config{})
				rt.SetContainerBehavior("stubborn", fake.Behavior{IgnoreTERM: true})
				rt.SetContainerBehavior("polite", fake.Behavior{TermExitCode: 143})
				pod := newPod("web", v1.RestartPolicyAlways, ctr("polite"), ctr("stubborn"))
				pod.Spec.TerminationGracePeriodSeconds = tt.spec
				pod.DeletionGracePeriodSeconds = tt.deletion
				rt.AddRunningPod(pod)
				pods, err := rt.GetPods(context.Background(), false)
				require.NoError(t, err)

				done := make(chan error, 1)
				go func() { done <- rt.KillPod(context.Background(), pod, *pods[0], tt.override) }()
				synctest.Wait()
				select {
				case err := <-done:
					t.Fatalf("KillPod returned before the grace period ended: %v", err)
				default:
				}
				polite := newest(t, rt, pod, "polite")
				assert.Equal(t, runtime.ContainerStateExited, polite.State, "a container that honours TERM stops at once")
				assert.Equal(t, 143, polite.ExitCode)
				assert.Equal(t, runtime.ContainerStateRunning, newest(t, rt, pod, "stubborn").State)

				clk.Step(time.Duration(tt.wantGrace)*time.Second - time.Nanosecond)
				synctest.Wait()
				assert.Empty(t, done, "still within the grace period")
				clk.Step(time.Nanosecond)
				require.NoError(t, <-done)

				stubborn := newest(t, rt, pod, "stubborn")
				assert.Equal(t, runtime.ContainerStateExited, stubborn.State)
				assert.Equal(t, 137, stubborn.ExitCode)
				assert.Equal(t, t0.Add(time.Duration(tt.wantGrace)*time.Second), stubborn.FinishedAt)

				kills := rt.Kills()
				require.Len(t, kills, 2)
				for _, k := range kills {
					assert.Equal(t, tt.wantGrace, k.GracePeriod, k.Name)
					assert.Equal(t, k.Name == "stubborn", k.Forced, k.Name)
				}
			})
		})
	}
}

func TestKillPodCanceledDuringGracePeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, _ := newRuntime(t, fake.Config{})
		rt.SetContainerBehavior("app", fake.Behavior{IgnoreTERM: true})
		pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
		rt.AddRunningPod(pod)
		pods, err := rt.GetPods(context.Background(), false)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rt.KillPod(ctx, pod, *pods[0], nil) }()
		synctest.Wait()
		cancel()
		err = <-done
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, runtime.ErrKillContainer)
		assert.Equal(t, runtime.ContainerStateRunning, newest(t, rt, pod, "app").State, "an aborted kill leaves the container running")
	})
}

func TestSyncPodCrashLoopBackOff(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{})
	rt.SetImageBehavior("app:1", fake.Behavior{Exit: true, ExitCode: 1})
	backoff := runtime.NewBackoff(10*time.Second, 40*time.Second, 0, clk)
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))

	require.NoError(t, sync(t, rt, pod, backoff).Error())
	assert.Equal(t, runtime.ContainerStateExited, newest(t, rt, pod, "app").State, "exits at once")
	require.NoError(t, sync(t, rt, pod, backoff).Error(), "the first restart is immediate")
	assert.Equal(t, 1, newest(t, rt, pod, "app").RestartCount)

	var delays []time.Duration
	for range 5 {
		res := sync(t, rt, pod, backoff)
		require.ErrorIs(t, res.Error(), runtime.ErrCrashLoopBackOff)
		assert.Equal(t, []string{"StartContainer app: CrashLoopBackOff"}, steps(res))
		d := backoff.Get(runtime.BackoffKey(pod, &pod.Spec.Containers[0]))
		assert.Contains(t, res.SyncResults[0].Message, "back-off "+d.String())
		delays = append(delays, d)

		clk.Step(d - time.Nanosecond)
		assert.ErrorIs(t, sync(t, rt, pod, backoff).Error(), runtime.ErrCrashLoopBackOff, "still backing off")
		clk.Step(time.Nanosecond)
		require.NoError(t, sync(t, rt, pod, backoff).Error(), "restarted once the back-off passed")
	}
	assert.Equal(t, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second, 40 * time.Second}, delays)
	assert.Equal(t, 6, newest(t, rt, pod, "app").RestartCount)

	changed := pod.DeepCopy()
	changed.Spec.Containers[0].Args = []string{"--fixed"}
	res := sync(t, rt, changed, backoff)
	assert.NoError(t, res.Error(), "a changed spec starts without the old back-off")
}

func TestSyncPodImagePull(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{ImagePullBackoffInitial: 10 * time.Second, ImagePullBackoffMax: time.Minute})
	rt.SetImageBehavior("app:1", fake.Behavior{PullError: "manifest unknown"})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))

	res := sync(t, rt, pod, nil)
	assert.Equal(t, []string{"CreatePodSandbox uid-web", "StartContainer app: ErrImagePull"}, steps(res))
	assert.Contains(t, res.SyncResults[1].Message, "manifest unknown")
	assert.Equal(t, 1, rt.CallCount("PullImage"))

	res = sync(t, rt, pod, nil)
	assert.Equal(t, []string{"StartContainer app: ImagePullBackOff"}, steps(res))
	assert.Equal(t, 1, rt.CallCount("PullImage"), "no pull during the back-off")

	clk.Step(10 * time.Second)
	assert.Equal(t, []string{"StartContainer app: ErrImagePull"}, steps(sync(t, rt, pod, nil)))
	clk.Step(10 * time.Second)
	assert.Equal(t, []string{"StartContainer app: ImagePullBackOff"}, steps(sync(t, rt, pod, nil)), "the back-off doubled")

	rt.SetImageBehavior("app:1", fake.Behavior{})
	clk.Step(10 * time.Second)
	assert.Equal(t, []string{"StartContainer app"}, steps(sync(t, rt, pod, nil)))
	assert.Equal(t, 3, rt.CallCount("PullImage"))
	imgs, err := rt.ListImages(context.Background())
	require.NoError(t, err)
	require.Len(t, imgs, 1)
	assert.Equal(t, newest(t, rt, pod, "app").ImageID, imgs[0].ID)
}

func TestSyncPodImagePullPolicy(t *testing.T) {
	tests := []struct {
		name      string
		image     string
		policy    v1.PullPolicy
		present   bool
		wantPulls int
		wantStep  string
	}{
		{name: "IfNotPresent does not pull a present image", image: "app:1", policy: v1.PullIfNotPresent, present: true, wantPulls: 0, wantStep: "StartContainer app"},
		{name: "IfNotPresent pulls a missing image", image: "app:1", policy: v1.PullIfNotPresent, wantPulls: 1, wantStep: "StartContainer app"},
		{name: "Always pulls a present image", image: "app:1", policy: v1.PullAlways, present: true, wantPulls: 1, wantStep: "StartContainer app"},
		{name: "Never fails on a missing image", image: "app:1", policy: v1.PullNever, wantPulls: 0, wantStep: "StartContainer app: ErrImageNeverPull"},
		{name: "Never uses a present image", image: "app:1", policy: v1.PullNever, present: true, wantPulls: 0, wantStep: "StartContainer app"},
		{name: "latest tag defaults to Always", image: "app:latest", present: true, wantPulls: 1, wantStep: "StartContainer app"},
		{name: "no tag defaults to Always", image: "registry:5000/app", present: true, wantPulls: 1, wantStep: "StartContainer app"},
		{name: "a tag defaults to IfNotPresent", image: "registry:5000/app:2", present: true, wantPulls: 0, wantStep: "StartContainer app"},
		{name: "empty image is an invalid name", image: "", wantPulls: 0, wantStep: "StartContainer app: InvalidImageName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var imgs []string
			if tt.present {
				imgs = []string{tt.image}
			}
			rt, _ := newRuntime(t, fake.Config{Images: imgs})
			c := v1.Container{Name: "app", Image: tt.image, ImagePullPolicy: tt.policy}
			res := sync(t, rt, newPod("web", v1.RestartPolicyAlways, c), nil)
			assert.Equal(t, []string{"CreatePodSandbox uid-web", tt.wantStep}, steps(res))
			assert.Equal(t, tt.wantPulls, rt.CallCount("PullImage"))
		})
	}
}

func TestSyncPodStartError(t *testing.T) {
	t.Run("run error leaves an exited container that backs off", func(t *testing.T) {
		rt, clk := newRuntime(t, fake.Config{})
		rt.SetContainerBehavior("app", fake.Behavior{StartError: errors.New("exec format error")})
		backoff := runtime.NewBackoff(10*time.Second, time.Minute, 0, clk)
		pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
		res := sync(t, rt, pod, backoff)
		assert.ErrorIs(t, res.Error(), runtime.ErrRunContainer)
		assert.Equal(t, "exec format error", res.SyncResults[1].Message)
		app := newest(t, rt, pod, "app")
		assert.Equal(t, runtime.ContainerStateExited, app.State)
		assert.Equal(t, 128, app.ExitCode)
		assert.Equal(t, "StartError", app.Reason)

		assert.ErrorIs(t, sync(t, rt, pod, backoff).Error(), runtime.ErrRunContainer, "first retry is immediate")
		assert.ErrorIs(t, sync(t, rt, pod, backoff).Error(), runtime.ErrCrashLoopBackOff)
	})
	t.Run("config error leaves no container", func(t *testing.T) {
		rt, _ := newRuntime(t, fake.Config{})
		rt.SetContainerBehavior("app", fake.Behavior{StartError: runtime.ErrCreateContainerConfig})
		pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
		res := sync(t, rt, pod, nil)
		assert.Equal(t, []string{"CreatePodSandbox uid-web", "StartContainer app: CreateContainerConfigError"}, steps(res))
		assert.Nil(t, newest(t, rt, pod, "app"))
	})
	t.Run("failed regular init container ends the sync, a failed sidecar does not", func(t *testing.T) {
		rt, _ := newRuntime(t, fake.Config{})
		rt.SetContainerBehavior("proxy", fake.Behavior{StartError: runtime.ErrCreateContainer})
		pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
		pod.Spec.InitContainers = []v1.Container{sidecar("proxy")}
		rt.AddRunningPod(pod)
		require.NoError(t, rt.ExitContainer(pod.UID, "proxy", 1, ""))
		pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "debug:1"}}}
		res := sync(t, rt, pod, nil)
		assert.Equal(t, []string{"StartContainer debug", "InitContainer proxy: CreateContainerError"}, steps(res))
	})
}

func TestSyncPodRestartsChangedContainer(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	pod := newPod("web", v1.RestartPolicyNever, ctr("app"), ctr("side"))
	require.NoError(t, sync(t, rt, pod, nil).Error())
	old := newest(t, rt, pod, "app")

	pod.Spec.Containers[0].Image = "app:2"
	res := sync(t, rt, pod, nil)
	require.NoError(t, res.Error())
	assert.Equal(t, []string{"KillContainer app", "StartContainer app"}, steps(res))
	app := newest(t, rt, pod, "app")
	assert.NotEqual(t, old.ID, app.ID)
	assert.Equal(t, "app:2", app.Image)
	assert.Equal(t, 1, app.RestartCount)
	assert.Equal(t, runtime.ContainerStateRunning, newest(t, rt, pod, "side").State, "the unchanged container keeps running")
}

func TestSyncPodKillsUnknownContainerBeforeRestart(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
	rt.AddRunningPod(pod)
	require.NoError(t, rt.SetContainerUnknown(pod.UID, "app"))
	lost := newest(t, rt, pod, "app")
	assert.Equal(t, runtime.ContainerStateUnknown, lost.State)

	res := sync(t, rt, pod, nil)
	require.NoError(t, res.Error())
	assert.Equal(t, []string{"KillContainer app", "StartContainer app"}, steps(res))
	st := status(t, rt, pod)
	require.Len(t, st.ContainerStatuses, 2)
	assert.Equal(t, runtime.ContainerStateRunning, st.ContainerStatuses[0].State)
	assert.Equal(t, lost.ID, st.ContainerStatuses[1].ID)
	assert.Equal(t, runtime.ContainerStateExited, st.ContainerStatuses[1].State)
}

func TestSyncPodRecreatesLostSandbox(t *testing.T) {
	t.Run("Always recreates the sandbox and restarts from the init containers", func(t *testing.T) {
		rt, _ := newRuntime(t, fake.Config{})
		pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
		pod.Spec.InitContainers = []v1.Container{ctr("init0")}
		rt.AddRunningPod(pod)
		require.NoError(t, rt.StopSandbox(pod.UID))
		assert.Equal(t, 137, newest(t, rt, pod, "app").ExitCode, "the sandbox took its containers down")

		res := sync(t, rt, pod, nil)
		require.NoError(t, res.Error())
		assert.Equal(t, []string{"CreatePodSandbox uid-web", "InitContainer init0"}, steps(res), "nothing was left to stop")
		st := status(t, rt, pod)
		require.Len(t, st.SandboxStatuses, 2)
		assert.Equal(t, uint32(1), st.SandboxStatuses[0].Attempt)
		assert.Equal(t, runtime.SandboxStateReady, st.SandboxStatuses[0].State)
		init0 := st.FindContainerStatusByName("init0")
		assert.Equal(t, st.SandboxStatuses[0].ID, init0.SandboxID)
		assert.Equal(t, 0, init0.RestartCount, "init containers were purged with the old sandbox")
	})
	t.Run("Never does not recreate the sandbox of a pod whose containers ran", func(t *testing.T) {
		rt, _ := newRuntime(t, fake.Config{})
		pod := newPod("web", v1.RestartPolicyNever, ctr("app"))
		rt.AddRunningPod(pod)
		require.NoError(t, rt.StopSandbox(pod.UID))
		res := sync(t, rt, pod, nil)
		assert.NotContains(t, steps(res), "CreatePodSandbox uid-web")
		assert.Len(t, status(t, rt, pod).SandboxStatuses, 1)
	})
	t.Run("host network change recreates the sandbox", func(t *testing.T) {
		rt, _ := newRuntime(t, fake.Config{})
		pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
		rt.AddRunningPod(pod)
		pod.Spec.HostNetwork = true
		res := sync(t, rt, pod, nil)
		assert.Equal(t, []string{"KillContainer app", "KillPodSandbox uid-web", "CreatePodSandbox uid-web", "StartContainer app"}, steps(res))
		st := status(t, rt, pod)
		assert.True(t, st.SandboxStatuses[0].HostNetwork)
		assert.Empty(t, st.IPs, "a host-network pod gets no pod IP from the fake")
	})
}

func TestSyncPodEphemeralContainersStartOnce(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	rt.SetContainerBehavior("debug", fake.Behavior{Exit: true, ExitCode: 3})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
	rt.AddRunningPod(pod)
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "debug:1"}}}
	assert.Equal(t, []string{"StartContainer debug"}, steps(sync(t, rt, pod, nil)))
	assert.Equal(t, runtime.ContainerStateExited, newest(t, rt, pod, "debug").State)
	assert.Empty(t, sync(t, rt, pod, nil).SyncResults, "an exited ephemeral container is never restarted")
}

func TestSyncPodDeletedPodStartsNothing(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"), ctr("job"))
	rt.AddRunningPod(pod)
	require.NoError(t, rt.ExitContainer(pod.UID, "job", 1, ""))
	pod.DeletionTimestamp = &metav1.Time{Time: t0}
	assert.Empty(t, sync(t, rt, pod, nil).SyncResults)
}

func TestSyncPodNilInputs(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	res := rt.SyncPod(context.Background(), nil, nil, nil, nil)
	assert.Error(t, res.Error())
	pods, err := rt.GetPods(context.Background(), true)
	require.NoError(t, err)
	assert.Empty(t, pods, "a bad call disturbs nothing")

	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
	res = rt.SyncPod(context.Background(), pod, nil, nil, nil)
	assert.NoError(t, res.Error(), "a nil status means the runtime's own")
	assert.Equal(t, runtime.ContainerStateRunning, newest(t, rt, pod, "app").State)
}
