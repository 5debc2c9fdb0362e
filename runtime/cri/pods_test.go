package cri_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

func twoContainers(p *v1.Pod) {
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "side", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent})
}

func TestCrashLoopBackOff(t *testing.T) {
	e := newFakeEnv(t)
	e.srv.SetBehavior("main", fakecri.Behavior{ExitOnStart: true, ExitCode: 1})
	pod := newPod("crash", "busybox:1")
	b := runtime.NewBackoff(10*time.Second, 300*time.Second, 0, e.clock)

	res := e.sync(t, pod, b)
	require.NoError(t, res.Error(), "first start")
	res = e.sync(t, pod, b)
	require.NoError(t, res.Error(), "the first restart is immediate")
	require.Equal(t, 2, e.srv.Calls("StartContainer"))

	steps := []struct {
		advance   time.Duration
		wantStart bool
	}{
		{0, false},
		{9 * time.Second, false},
		{1 * time.Second, true}, // 10s after the last exit
		{10 * time.Second, false},
		{10 * time.Second, true}, // 20s
		{39 * time.Second, false},
		{1 * time.Second, true}, // 40s
	}
	starts := 2
	for i, s := range steps {
		e.clock.Step(s.advance)
		res := e.sync(t, pod, b)
		if s.wantStart {
			starts++
			require.NoError(t, res.Error(), "step %d", i)
		} else {
			require.ErrorIs(t, res.Error(), runtime.ErrCrashLoopBackOff, "step %d", i)
			require.Equal(t, "CrashLoopBackOff", runtime.Reason(res.Error()))
		}
		require.Equal(t, starts, e.srv.Calls("StartContainer"), "step %d", i)
	}

	st := e.status(t, pod)
	var counts []int
	for _, c := range st.ContainerStatuses {
		counts = append(counts, c.RestartCount)
		require.Equal(t, 1, c.ExitCode)
	}
	require.Equal(t, []int{4, 3, 2, 1, 0}, counts, "newest first, restart count from annotations")
}

func TestKillPodGracePeriod(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*v1.Pod)
		override *int64
		orphan   bool
		want     int64
	}{
		{name: "pod's grace period", mutate: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](7) }, want: 7},
		{name: "deletion's grace period wins", mutate: func(p *v1.Pod) {
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](7)
			p.DeletionGracePeriodSeconds = ptr.To[int64](3)
			p.DeletionTimestamp = &metav1.Time{Time: t0}
		}, want: 3},
		{name: "override wins", mutate: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](7) }, override: ptr.To[int64](2), want: 2},
		{name: "zero is raised to one second", mutate: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0) }, want: 1},
		{name: "orphan's grace period comes from annotations", mutate: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](9) }, orphan: true, want: 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEnv(t)
			pod := newPod("kill", "busybox:1", twoContainers, tt.mutate)
			res := e.sync(t, pod, nil)
			require.NoError(t, res.Error())
			pods, err := e.m.GetPods(e.ctx, false)
			require.NoError(t, err)
			require.Len(t, pods, 1)
			require.Len(t, pods[0].Containers, 2)
			require.Len(t, pods[0].Sandboxes, 1)

			target := pod
			if tt.orphan {
				target = nil
			}
			require.NoError(t, e.m.KillPod(e.ctx, target, *pods[0], tt.override))
			for _, c := range pods[0].Containers {
				got, ok := e.srv.StopTimeout(c.ID.ID)
				require.True(t, ok, c.Name)
				require.Equal(t, tt.want, got, c.Name)
			}
			st := e.status(t, pod)
			require.Nil(t, st.ReadySandbox(), "the sandbox is stopped")
			require.Empty(t, st.RunningContainerStatuses())

			running, err := e.m.GetPods(e.ctx, false)
			require.NoError(t, err)
			require.Empty(t, running, "a killed pod does not run")
			all, err := e.m.GetPods(e.ctx, true)
			require.NoError(t, err)
			require.Len(t, all, 1, "until it is removed")
			require.NoError(t, e.m.RemovePod(e.ctx, pod.UID))
			all, err = e.m.GetPods(e.ctx, true)
			require.NoError(t, err)
			require.Empty(t, all, "nothing left behind")
		})
	}
}

func TestKillPodStopsSandboxOnlyAfterContainers(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("kill", "busybox:1")
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	pods, err := e.m.GetPods(e.ctx, false)
	require.NoError(t, err)
	e.srv.FailNext("StopContainer", status.Error(codes.Internal, "stuck"))
	err = e.m.KillPod(e.ctx, pod, *pods[0], nil)
	require.ErrorIs(t, err, runtime.ErrKillContainer)
	require.Zero(t, e.srv.Calls("StopPodSandbox"), "the sandbox stays while a container may live")
	require.NoError(t, e.m.KillPod(e.ctx, pod, *pods[0], nil), "a retry succeeds")
	require.Equal(t, 1, e.srv.Calls("StopPodSandbox"))
}

func TestGetPodStatus(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("st", "busybox:1", twoContainers)
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())

	t.Run("unknown pod has an empty status", func(t *testing.T) {
		st, err := e.m.GetPodStatus(e.ctx, "nope", "n", "ns")
		require.NoError(t, err)
		require.Equal(t, "nope", string(st.ID))
		require.Empty(t, st.ContainerStatuses)
		require.Empty(t, st.SandboxStatuses)
	})
	t.Run("container removed since the list is left out", func(t *testing.T) {
		e.srv.FailNext("ContainerStatus", status.Error(codes.NotFound, "gone"))
		st := e.status(t, pod)
		require.Len(t, st.ContainerStatuses, 1)
	})
	t.Run("runtime errors are errors", func(t *testing.T) {
		e.srv.FailNext("ListContainers", status.Error(codes.Unavailable, "down"))
		_, err := e.m.GetPodStatus(e.ctx, pod.UID, pod.Name, pod.Namespace)
		require.Error(t, err)
	})
	t.Run("other pods are not included", func(t *testing.T) {
		other := newPod("other", "busybox:1")
		res := e.sync(t, other, nil)
		require.NoError(t, res.Error())
		st := e.status(t, pod)
		require.Len(t, st.ContainerStatuses, 2)
		require.Len(t, st.SandboxStatuses, 1)
	})
}

// GetPodStatusListed, given a pod of GetPods(ctx, true), returns what
// GetPodStatus does, with two CRI calls fewer: the listing is not repeated.
func TestGetPodStatusListedMatchesGetPodStatus(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("listed", "busybox:1", twoContainers)
	require.NoError(t, e.sync(t, pod, nil).Error())
	// A second sandbox attempt, so that the newest one must come first.
	e.clock.Step(time.Second)
	require.NoError(t, e.m.KillPod(e.ctx, pod, e.status(t, pod).RunningPod(e.m.Type()), nil))
	require.NoError(t, e.sync(t, pod, nil).Error())

	pods, err := e.m.GetPods(e.ctx, true)
	require.NoError(t, err)
	var listed *runtime.Pod
	for _, p := range pods {
		if p.ID == pod.UID {
			listed = p
		}
	}
	require.NotNil(t, listed)
	e.srv.ResetCalls()
	want, err := e.m.GetPodStatus(e.ctx, pod.UID, pod.Name, pod.Namespace)
	require.NoError(t, err)
	e.srv.ResetCalls()
	got, err := e.m.GetPodStatusListed(e.ctx, listed)
	require.NoError(t, err)
	calls := e.srv.CallCounts()
	require.Zero(t, calls["ListPodSandbox"]+calls["ListContainers"], "no listing: %v", calls)
	require.Len(t, got.SandboxStatuses, 2)
	require.Equal(t, uint32(1), got.SandboxStatuses[0].Attempt, "newest sandbox first")
	require.Equal(t, want, got)

	_, err = e.m.GetPodStatusListed(e.ctx, nil)
	require.ErrorIs(t, err, runtime.ErrInvalidConfig)
}

// An inspection asks the runtime only for what may have changed: the
// status of a container listed running or exited, and of a sandbox listed
// as before, is what the runtime said the first time.
func TestInspectionAsksOnlyForWhatChanged(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("memo", "busybox:1", twoContainers)
	require.NoError(t, e.sync(t, pod, nil).Error())
	inspect := func() (*runtime.PodStatus, map[string]int) {
		t.Helper()
		pods, err := e.m.GetPods(e.ctx, true)
		require.NoError(t, err)
		e.srv.ResetCalls()
		for _, p := range pods {
			if p.ID == pod.UID {
				st, err := e.m.GetPodStatusListed(e.ctx, p)
				require.NoError(t, err)
				return st, e.srv.CallCounts()
			}
		}
		t.Fatal("pod not listed")
		return nil, nil
	}

	first, calls := inspect()
	require.Equal(t, map[string]int{"PodSandboxStatus": 1, "ContainerStatus": 2}, calls, "a first inspection asks for everything")
	require.NotEmpty(t, first.IPs)

	again, calls := inspect()
	require.Empty(t, calls, "nothing changed: nothing asked")
	require.Equal(t, first, again)
	again.ContainerStatuses[0].Message = "changed by a consumer"
	third, _ := inspect()
	require.Equal(t, first, third, "each inspection gets its own copies")

	var exited runtime.ContainerID
	for _, c := range first.ContainerStatuses {
		if c.Name == "side" {
			exited = c.ID
		}
	}
	require.NoError(t, e.srv.Exit(exited.ID, 3))
	after, calls := inspect()
	require.Equal(t, map[string]int{"ContainerStatus": 1}, calls, "only the container that exited")
	for _, c := range after.ContainerStatuses {
		if c.ID == exited {
			require.Equal(t, runtime.ContainerStateExited, c.State)
			require.Equal(t, 3, c.ExitCode)
		}
	}
	require.Equal(t, first.IPs, after.IPs)
	_, calls = inspect()
	require.Empty(t, calls)

	// GetPodStatus lists, then asks only for what changed too.
	e.srv.ResetCalls()
	full := e.status(t, pod)
	require.Equal(t, map[string]int{"ListPodSandbox": 1, "ListContainers": 1}, e.srv.CallCounts())
	require.Equal(t, after, full)
}

// A container listed as created (not yet started) gets its status from the
// listing: a ContainerStatus call would say nothing more.
func TestCreatedContainerStatusComesFromTheListing(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("created", "busybox:1")
	e.srv.SetLatency("StartContainer", time.Minute) // held created until the test ends
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(e.ctx)
	go func() {
		defer close(done)
		_ = e.m.SyncPod(ctx, pod, &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}, nil, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })

	var listed *runtime.Pod
	require.Eventually(t, func() bool {
		pods, err := e.m.GetPods(e.ctx, true)
		require.NoError(t, err)
		for _, p := range pods {
			if p.ID == pod.UID && len(p.Containers) == 1 && p.Containers[0].State == runtime.ContainerStateCreated {
				listed = p
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)

	e.srv.ResetCalls()
	st, err := e.m.GetPodStatusListed(e.ctx, listed)
	require.NoError(t, err)
	require.Zero(t, e.srv.CallCounts()["ContainerStatus"])
	require.Len(t, st.ContainerStatuses, 1)
	got := st.ContainerStatuses[0]

	resp, err := e.srv.Runtime.ContainerStatus(e.ctx, listed.Containers[0].ID.ID, false)
	require.NoError(t, err)
	s := resp.GetStatus()
	require.Equal(t, runtime.ContainerStateCreated, got.State)
	require.Equal(t, "main", got.Name)
	require.Equal(t, time.Unix(0, s.CreatedAt), got.CreatedAt)
	require.Equal(t, s.GetImage().GetImage(), got.Image)
	require.Equal(t, s.ImageRef, got.ImageID)
	require.Equal(t, 0, got.RestartCount)
	require.NotZero(t, got.Hash)
	require.Equal(t, listed.Containers[0].SandboxID, got.SandboxID)
}
