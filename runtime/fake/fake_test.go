package fake_test

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

// failurePattern runs a fixed sequence of calls and returns which failed.
func failurePattern(t *testing.T, seed uint64) []bool {
	rt, _ := newRuntime(t, fake.Config{Seed: seed, FailureRates: map[string]float64{"GetPodStatus": 0.3, "SyncPod": 0.5}})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
	var out []bool
	for range 100 {
		_, err := rt.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			require.ErrorIs(t, err, fake.ErrInjected)
		}
		out = append(out, err != nil)
		res := rt.SyncPod(context.Background(), pod, nil, nil, nil)
		if err := res.Error(); err != nil {
			require.ErrorIs(t, err, fake.ErrInjected)
		}
		out = append(out, res.Error() != nil)
	}
	return out
}

func TestFaultInjectionIsReproducibleBySeed(t *testing.T) {
	a, b := failurePattern(t, 42), failurePattern(t, 42)
	assert.Equal(t, a, b, "same seed, same failures")
	assert.NotEqual(t, a, failurePattern(t, 43), "another seed, other failures")

	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	assert.Greater(t, n, 20, "failures happen")
	assert.Less(t, n, 180, "and not always")
}

func TestFaultInjectionRates(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{FailureRates: map[string]float64{"GetPods": 1}})
	_, err := rt.GetPods(context.Background(), false)
	assert.ErrorIs(t, err, fake.ErrInjected)
	assert.Contains(t, err.Error(), "GetPods")
	_, err = rt.Version(context.Background())
	assert.NoError(t, err, "other methods are unaffected")

	require.NoError(t, rt.SetFailureRate("GetPods", 0))
	_, err = rt.GetPods(context.Background(), false)
	assert.NoError(t, err, "rate 0 turns injection off")
	assert.ErrorIs(t, rt.SetFailureRate("GetPods", 2), runtime.ErrInvalidConfig)
}

func TestFaultInjectionInSteps(t *testing.T) {
	tests := []struct {
		method   string
		sentinel error
		want     []string
	}{
		{"CreatePodSandbox", runtime.ErrCreatePodSandbox, []string{"CreatePodSandbox uid-web: CreatePodSandboxError"}},
		{"StartContainer", runtime.ErrRunContainer, []string{"CreatePodSandbox uid-web", "StartContainer app: RunContainerError"}},
		{"PullImage", runtime.ErrImagePull, []string{"CreatePodSandbox uid-web", "StartContainer app: ErrImagePull"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" fault fails its step", func(t *testing.T) {
			rt, _ := newRuntime(t, fake.Config{FailureRates: map[string]float64{tt.method: 1}})
			res := sync(t, rt, newPod("web", v1.RestartPolicyAlways, ctr("app")), nil)
			assert.Equal(t, tt.want, steps(res))
			assert.ErrorIs(t, res.Error(), tt.sentinel)
			assert.ErrorIs(t, res.Error(), fake.ErrInjected)
		})
	}
	t.Run("StopContainer fault fails KillPod", func(t *testing.T) {
		rt, _ := newRuntime(t, fake.Config{})
		pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
		rt.AddRunningPod(pod)
		pods, err := rt.GetPods(context.Background(), false)
		require.NoError(t, err)
		require.NoError(t, rt.SetFailureRate("StopContainer", 1))
		err = rt.KillPod(context.Background(), pod, *pods[0], nil)
		assert.ErrorIs(t, err, runtime.ErrKillContainer)
		assert.ErrorIs(t, err, fake.ErrInjected)
	})
}

func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, clk := newRuntime(t, fake.Config{})
		require.NoError(t, rt.SetLatency("GetPods", 5*time.Second))
		done := make(chan error, 1)
		go func() {
			_, err := rt.GetPods(context.Background(), false)
			done <- err
		}()
		synctest.Wait()
		assert.Empty(t, done, "the call waits on the clock")
		clk.Step(5 * time.Second)
		assert.NoError(t, <-done)

		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			_, err := rt.GetPods(ctx, false)
			done <- err
		}()
		synctest.Wait()
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled, "a slow call respects ctx")
	})
}

func TestStartLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, clk := newRuntime(t, fake.Config{})
		rt.SetImageBehavior("slow:1", fake.Behavior{StartLatency: time.Minute})
		pod := newPod("web", v1.RestartPolicyAlways, v1.Container{Name: "app", Image: "slow:1"})
		done := make(chan runtime.PodSyncResult, 1)
		go func() { done <- rt.SyncPod(context.Background(), pod, nil, nil, nil) }()
		synctest.Wait()
		assert.Empty(t, done)
		_, err := rt.GetPods(context.Background(), true)
		assert.NoError(t, err, "other calls proceed while a start is slow")
		clk.Step(time.Minute)
		res := <-done
		require.NoError(t, res.Error())
		assert.Equal(t, t0.Add(time.Minute), newest(t, rt, pod, "app").StartedAt)
	})
}

func TestCallRecording(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{MaxRecordedCalls: 3})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
	for i := range 4 {
		clk.Step(time.Second)
		_, err := rt.GetPodStatus(context.Background(), types.UID(fmt.Sprint(i)), "", "")
		require.NoError(t, err)
	}
	rt.SyncPod(context.Background(), pod, nil, nil, nil)
	assert.Equal(t, 4, rt.CallCount("GetPodStatus"))
	assert.Equal(t, 1, rt.CallCount("SyncPod"))
	assert.Equal(t, 1, rt.CallCount("CreatePodSandbox"))
	assert.Equal(t, 1, rt.CallCount("StartContainer"))
	assert.Equal(t, 1, rt.CallCount("PullImage"), "the image was not present")
	assert.Equal(t, 0, rt.CallCount("NoSuchMethod"))

	calls := rt.Calls()
	require.Len(t, calls, 3, "only the latest calls are kept")
	assert.Equal(t, []fake.Call{
		{Method: "CreatePodSandbox", PodUID: "uid-web", Time: t0.Add(4 * time.Second)},
		{Method: "PullImage", PodUID: "uid-web", Time: t0.Add(4 * time.Second)},
		{Method: "StartContainer", PodUID: "uid-web", Time: t0.Add(4 * time.Second)},
	}, calls)

	rt.ResetCalls()
	assert.Empty(t, rt.Calls())
	assert.Zero(t, rt.CallCount("SyncPod"))
}

func TestNegativeMaxRecordedCallsRecordsNoneButCounts(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{MaxRecordedCalls: -1})
	for i := range 3 {
		_, err := rt.GetPodStatus(context.Background(), types.UID(fmt.Sprint(i)), "", "")
		require.NoError(t, err)
	}
	assert.Empty(t, rt.Calls(), "no call list")
	assert.Equal(t, 3, rt.CallCount("GetPodStatus"), "counters are kept")
}

func TestGetPods(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	done := newPod("done", v1.RestartPolicyNever, ctr("job"))
	web := newPod("web", v1.RestartPolicyAlways, ctr("app"), ctr("side"))
	rt.AddRunningPod(done)
	rt.AddRunningPod(web)
	require.NoError(t, rt.ExitContainer(done.UID, "job", 0, ""))
	require.NoError(t, rt.ExitContainer(web.UID, "side", 1, ""))

	running, err := rt.GetPods(context.Background(), false)
	require.NoError(t, err)
	require.Len(t, running, 2, "a ready sandbox keeps a pod listed")
	assert.Equal(t, web.UID, running[0].ID, "newest first")
	assert.Equal(t, "web", running[0].Name)
	require.Len(t, running[0].Containers, 1, "only running containers")
	assert.Equal(t, "app", running[0].Containers[0].Name)
	assert.Equal(t, runtime.HashContainer(&web.Spec.Containers[0]), running[0].Containers[0].Hash)
	require.Len(t, running[0].Sandboxes, 1)
	assert.Equal(t, runtime.ContainerStateRunning, running[0].Sandboxes[0].State)
	assert.Empty(t, running[1].Containers)

	all, err := rt.GetPods(context.Background(), true)
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Len(t, all[0].Containers, 2, "all includes exited containers")

	// The result is the caller's to change.
	all[0].Containers[0].Name = "mutated"
	all[0].Containers = append(all[0].Containers, &runtime.Container{Name: "extra"})
	again, err := rt.GetPods(context.Background(), true)
	require.NoError(t, err)
	assert.Len(t, again[0].Containers, 2)
	assert.NotEqual(t, "mutated", again[0].Containers[0].Name)
	assert.Len(t, all[1].Containers, 1, "appending to one pod does not touch the next")
	assert.Equal(t, "job", all[1].Containers[0].Name)

	require.NoError(t, rt.StopSandbox(done.UID))
	running, err = rt.GetPods(context.Background(), false)
	require.NoError(t, err)
	assert.Len(t, running, 1, "a pod with nothing running is not listed without all")
}

func TestGetPodStatusOfUnknownPod(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	st, err := rt.GetPodStatus(context.Background(), "nope", "n", "ns")
	require.NoError(t, err)
	assert.Equal(t, &runtime.PodStatus{ID: "nope", Name: "n", Namespace: "ns", TimeStamp: t0}, st)
}

func TestGetPodStatusReturnsACopy(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
	rt.AddRunningPod(pod)
	st := status(t, rt, pod)
	ip := st.IPs[0]
	st.ContainerStatuses[0].State = runtime.ContainerStateExited
	st.IPs[0] = "1.2.3.4"
	assert.Equal(t, ip, st.SandboxStatuses[0].IPs[0], "the pod IPs do not alias the sandbox IPs")
	st.SandboxStatuses[0].IPs[0] = "5.6.7.8"
	again := status(t, rt, pod)
	assert.Equal(t, runtime.ContainerStateRunning, again.ContainerStatuses[0].State)
	assert.Equal(t, ip, again.IPs[0])
	assert.Equal(t, ip, again.SandboxStatuses[0].IPs[0])
}

func TestGarbageCollect(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{})
	rt.SetContainerBehavior("app", fake.Behavior{Exit: true, ExitCode: 1})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
	for range 4 {
		require.NoError(t, sync(t, rt, pod, nil).Error())
		clk.Step(time.Minute)
	}
	require.Len(t, status(t, rt, pod).ContainerStatuses, 4)

	ctx := context.Background()
	require.NoError(t, rt.GarbageCollect(ctx, runtime.GCPolicy{MinAge: time.Hour, MaxPerPodContainer: 1, MaxContainers: -1}, false))
	assert.Len(t, status(t, rt, pod).ContainerStatuses, 4, "nothing is older than MinAge")

	require.NoError(t, rt.GarbageCollect(ctx, runtime.GCPolicy{MaxPerPodContainer: 2, MaxContainers: -1}, false))
	st := status(t, rt, pod)
	require.Len(t, st.ContainerStatuses, 2, "two dead instances per container are kept")
	assert.Equal(t, 3, st.ContainerStatuses[0].RestartCount, "the newest are kept")

	other := newPod("other", v1.RestartPolicyNever, ctr("app"))
	require.NoError(t, sync(t, rt, other, nil).Error())
	require.NoError(t, rt.GarbageCollect(ctx, runtime.GCPolicy{MaxPerPodContainer: -1, MaxContainers: 1}, false))
	assert.Len(t, status(t, rt, pod).ContainerStatuses, 0, "the oldest go first beyond MaxContainers")
	assert.Len(t, status(t, rt, other).ContainerStatuses, 1)

	// A killed pod goes once all sources are ready.
	pods, err := rt.GetPods(ctx, true)
	require.NoError(t, err)
	for _, p := range pods {
		require.NoError(t, rt.KillPod(ctx, nil, *p, nil))
	}
	require.NoError(t, rt.GarbageCollect(ctx, runtime.GCPolicy{MaxPerPodContainer: -1, MaxContainers: -1}, false))
	pods, err = rt.GetPods(ctx, true)
	require.NoError(t, err)
	assert.Len(t, pods, 2, "killed pods stay while sources are not ready")
	require.NoError(t, rt.GarbageCollect(ctx, runtime.GCPolicy{MaxPerPodContainer: -1, MaxContainers: -1}, true))
	pods, err = rt.GetPods(ctx, true)
	require.NoError(t, err)
	assert.Empty(t, pods)
}

func TestImageService(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{Images: []string{"pause:3"}})
	rt.SetImageBehavior("bad:1", fake.Behavior{PullError: "unauthorized"})
	ctx := context.Background()

	id, err := rt.PullImage(ctx, "nginx:1", nil)
	require.NoError(t, err)
	again, err := rt.PullImage(ctx, "nginx:1", nil)
	require.NoError(t, err)
	assert.Equal(t, id, again, "image IDs are stable")

	_, err = rt.PullImage(ctx, "bad:1", nil)
	assert.ErrorIs(t, err, runtime.ErrImagePull)
	assert.Contains(t, err.Error(), "unauthorized")
	_, err = rt.PullImage(ctx, " ", nil)
	assert.ErrorIs(t, err, runtime.ErrInvalidImageName)

	imgs, err := rt.ListImages(ctx)
	require.NoError(t, err)
	require.Len(t, imgs, 2)
	assert.Equal(t, []string{"nginx:1"}, imgs[0].RepoTags)
	assert.Equal(t, []string{"pause:3"}, imgs[1].RepoTags)

	require.NoError(t, rt.RemoveImage(ctx, id), "by ID")
	require.NoError(t, rt.RemoveImage(ctx, "pause:3"), "by reference")
	assert.ErrorIs(t, rt.RemoveImage(ctx, "pause:3"), runtime.ErrNotFound)
	imgs, err = rt.ListImages(ctx)
	require.NoError(t, err)
	assert.Empty(t, imgs)
}

func TestTestHelpersRejectUnknownTargets(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	assert.ErrorIs(t, rt.ExitContainer("nope", "app", 1, ""), runtime.ErrNotFound)
	assert.ErrorIs(t, rt.SetContainerUnknown("nope", "app"), runtime.ErrNotFound)
	assert.ErrorIs(t, rt.StopSandbox("nope"), runtime.ErrNotFound)
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"))
	rt.AddRunningPod(pod)
	assert.ErrorIs(t, rt.ExitContainer(pod.UID, "other", 1, ""), runtime.ErrNotFound)
	require.NoError(t, rt.ExitContainer(pod.UID, "app", 137, "OOMKilled"))
	assert.Equal(t, "OOMKilled", newest(t, rt, pod, "app").Reason)
	assert.ErrorIs(t, rt.ExitContainer(pod.UID, "app", 1, ""), runtime.ErrNotFound, "no longer running")
	rt.RemovePod(pod.UID)
	assert.Empty(t, status(t, rt, pod).ContainerStatuses)
}

func TestConcurrentSyncAndList(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{Seed: 7, FailureRates: map[string]float64{"StartContainer": 0.1}})
	rt.SetContainerBehavior("flaky", fake.Behavior{Exit: true, ExitAfter: time.Second, ExitCode: 1})
	backoff := runtime.NewBackoff(time.Second, 4*time.Second, 0, clk)
	var pods []*v1.Pod
	for i := range 8 {
		pods = append(pods, newPod(fmt.Sprintf("p%d", i), v1.RestartPolicyAlways, ctr("app"), ctr("flaky")))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg gosync.WaitGroup
	for _, pod := range pods {
		wg.Go(func() {
			for range 50 {
				st, err := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
				if err != nil {
					t.Error(err)
					return
				}
				res := rt.SyncPod(ctx, pod, st, nil, backoff)
				if err := res.Error(); err != nil && !errors.Is(err, fake.ErrInjected) && !errors.Is(err, runtime.ErrCrashLoopBackOff) {
					t.Error(err)
				}
			}
		})
	}
	var listers gosync.WaitGroup
	for range 2 {
		listers.Go(func() {
			for ctx.Err() == nil {
				if _, err := rt.GetPods(ctx, true); err != nil && ctx.Err() == nil {
					t.Error(err)
				}
				clk.Step(100 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	cancel()
	listers.Wait()

	assert.Equal(t, 8*50, rt.CallCount("GetPodStatus"))
	assert.Equal(t, 8*50, rt.CallCount("SyncPod"))

	// Without faults and back-off, one more sync brings every pod up.
	require.NoError(t, rt.SetFailureRate("StartContainer", 0))
	for _, pod := range pods {
		require.NoError(t, sync(t, rt, pod, nil).Error())
		app := newest(t, rt, pod, "app")
		require.NotNil(t, app, pod.Name)
		assert.Equal(t, runtime.ContainerStateRunning, app.State, pod.Name)
		assert.Equal(t, runtime.ContainerStateRunning, newest(t, rt, pod, "flaky").State, pod.Name)
	}
}

func TestAddRunningPodsAndRemovePod(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	pods := rt.AddRunningPods(100, 2)
	require.Len(t, pods, 100)
	for i, p := range pods {
		if i%2 == 0 {
			rt.RemovePod(p.UID)
		}
	}
	listed, err := rt.GetPods(context.Background(), false)
	require.NoError(t, err)
	require.Len(t, listed, 50)
	for i, p := range listed {
		want := pods[len(pods)-1-2*i]
		assert.Equal(t, want.UID, p.ID, "newest first, removed pods gone")
		assert.Len(t, p.Containers, 2)
		assert.Empty(t, sync(t, rt, want, nil).SyncResults, "a seeded pod is at its spec")
	}
}

func TestSetCondition(t *testing.T) {
	rt, _ := newRuntime(t, fake.Config{})
	rt.SetCondition(runtime.RuntimeCondition{Type: runtime.NetworkReady, Status: false, Reason: "NoCNI"})
	st, err := rt.Status(context.Background())
	require.NoError(t, err)
	assert.False(t, st.Ready())
	assert.Equal(t, "NoCNI", st.Condition(runtime.NetworkReady).Reason)
	assert.True(t, st.Condition(runtime.RuntimeReady).Status)
	rt.SetCondition(runtime.RuntimeCondition{Type: "Custom", Status: true})
	st, err = rt.Status(context.Background())
	require.NoError(t, err)
	assert.Len(t, st.Conditions, 3)
}

// With a PodCIDR, sandboxes get its host addresses in turn and, once it
// wraps around, skip those still held.
func TestPodCIDRHandsOutFreeAddresses(t *testing.T) {
	_, err := fake.New(fake.Config{PodCIDR: "10.0.0.0/31"})
	require.ErrorIs(t, err, runtime.ErrInvalidConfig, "too small")
	_, err = fake.New(fake.Config{PodCIDR: "fd00::/64"})
	require.ErrorIs(t, err, runtime.ErrInvalidConfig, "not IPv4")
	rt, _ := newRuntime(t, fake.Config{PodCIDR: "10.244.3.0/30"}) // two host addresses
	ip := func(pod *v1.Pod) string {
		st, err := rt.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
		require.NoError(t, err)
		return st.IPs[0]
	}
	a, b, c := newPod("a", v1.RestartPolicyAlways, ctr("app")), newPod("b", v1.RestartPolicyAlways, ctr("app")), newPod("c", v1.RestartPolicyAlways, ctr("app"))
	for _, p := range []*v1.Pod{a, b} {
		require.NoError(t, rt.SyncPod(context.Background(), p, nil, nil, nil).Error())
	}
	assert.Equal(t, []string{"10.244.3.1", "10.244.3.2"}, []string{ip(a), ip(b)})
	rt.RemovePod(a.UID)
	require.NoError(t, rt.SyncPod(context.Background(), c, nil, nil, nil).Error())
	assert.Equal(t, "10.244.3.1", ip(c), "the freed address, not b's")
}
