package cri_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

func steps(res runtime.PodSyncResult) []string {
	var out []string
	for _, s := range res.SyncResults {
		out = append(out, string(s.Action)+" "+s.Target)
	}
	return out
}

func TestRestartPolicies(t *testing.T) {
	tests := []struct {
		name        string
		policy      v1.RestartPolicy
		exitCode    int32
		wantRestart bool
	}{
		{"Always restarts a succeeded container", v1.RestartPolicyAlways, 0, true},
		{"Always restarts a failed container", v1.RestartPolicyAlways, 1, true},
		{"OnFailure restarts a failed container", v1.RestartPolicyOnFailure, 2, true},
		{"OnFailure leaves a succeeded container", v1.RestartPolicyOnFailure, 0, false},
		{"Never leaves a failed container", v1.RestartPolicyNever, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEnv(t)
			pod := newPod("rp", "busybox:1", twoContainers, func(p *v1.Pod) { p.Spec.RestartPolicy = tt.policy })
			e.srv.SetBehavior("main", fakecri.Behavior{ExitOnStart: true, ExitCode: tt.exitCode})
			res := e.sync(t, pod, nil)
			require.NoError(t, res.Error())
			require.Equal(t, 2, e.srv.Calls("StartContainer"))

			res = e.sync(t, pod, nil)
			require.NoError(t, res.Error())
			want := 2
			if tt.wantRestart {
				want = 3
				require.Equal(t, []string{"StartContainer main"}, steps(res))
			} else {
				require.Empty(t, steps(res), "nothing to do while side runs")
			}
			require.Equal(t, want, e.srv.Calls("StartContainer"))
			require.Zero(t, e.srv.Calls("StopPodSandbox"), "side keeps the pod")
		})
	}
}

func TestPodIsKilledWhenNothingIsLeftToRun(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("done", "busybox:1", func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever })
	e.srv.SetBehavior("main", fakecri.Behavior{ExitOnStart: true})
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	res = e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	require.Equal(t, []string{"KillPodSandbox uid-done"}, steps(res))
	require.Equal(t, 1, e.srv.Calls("RunPodSandbox"), "no new sandbox")
	require.Nil(t, e.status(t, pod).ReadySandbox())
}

func TestInitContainersRunOneAtATime(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("init", "busybox:1", func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{
			{Name: "init1", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent},
			{Name: "init2", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent},
		}
	})
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	require.Equal(t, []string{"CreatePodSandbox uid-init", "InitContainer init1"}, steps(res))
	res = e.sync(t, pod, nil)
	require.Empty(t, steps(res), "init1 still runs")

	require.NoError(t, e.srv.Exit(e.srv.ContainerIDs("init1")[0], 0))
	res = e.sync(t, pod, nil)
	require.Equal(t, []string{"InitContainer init2"}, steps(res))

	require.NoError(t, e.srv.Exit(e.srv.ContainerIDs("init2")[0], 0))
	res = e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	require.Equal(t, []string{"StartContainer main"}, steps(res))
}

func TestFailedInitContainerIsRetriedWithBackOff(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("initfail", "busybox:1", func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent}}
	})
	e.srv.SetBehavior("init", fakecri.Behavior{ExitOnStart: true, ExitCode: 1})
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	res = e.sync(t, pod, nil)
	require.NoError(t, res.Error(), "first retry is immediate")
	res = e.sync(t, pod, nil)
	require.ErrorIs(t, res.Error(), runtime.ErrCrashLoopBackOff)
	require.Equal(t, []string{"InitContainer init"}, steps(res), "main does not start")
	require.Empty(t, e.srv.ContainerIDs("main"))
}

func TestSidecarStartsBeforeContainers(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("sidecar", "busybox:1", func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent,
			RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
	})
	var all []string
	for range 3 {
		res := e.sync(t, pod, nil)
		require.NoError(t, res.Error())
		all = append(all, steps(res)...)
	}
	require.Equal(t, []string{"CreatePodSandbox uid-sidecar", "InitContainer proxy", "StartContainer main"}, all)
	st := e.status(t, pod)
	require.Len(t, st.RunningContainerStatuses(), 2, "the sidecar keeps running")
}

func TestChangedSpecRestartsTheContainer(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("hash", "busybox:1")
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	old := e.srv.ContainerIDs("main")
	require.Len(t, old, 1)

	pod.Spec.Containers[0].Command = []string{"sleep", "7"}
	res = e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	require.Equal(t, []string{"KillContainer main", "StartContainer main"}, steps(res))
	st := e.status(t, pod)
	newest := st.FindContainerStatusByName("main")
	require.Equal(t, runtime.ContainerStateRunning, newest.State)
	require.Equal(t, 1, newest.RestartCount)
	require.Equal(t, runtime.HashContainer(&pod.Spec.Containers[0]), newest.Hash)
	require.Equal(t, 1, e.srv.Calls("RunPodSandbox"), "the sandbox stays")
}

func TestDeadSandboxIsRecreated(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("sb", "busybox:1")
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	st := e.status(t, pod)
	// The sandbox dies under the pod (for example the node rebooted).
	e.srv.Runtime.Lock()
	e.srv.Runtime.Sandboxes[st.SandboxStatuses[0].ID].State = 1 // SANDBOX_NOTREADY
	e.srv.Runtime.Unlock()

	res = e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	require.Equal(t, []string{"KillContainer main", "KillPodSandbox uid-sb", "CreatePodSandbox uid-sb", "StartContainer main"}, steps(res))
	st = e.status(t, pod)
	require.Len(t, st.SandboxStatuses, 2)
	require.EqualValues(t, 1, st.SandboxStatuses[0].Attempt, "attempt+1")
	require.Equal(t, runtime.SandboxStateReady, st.SandboxStatuses[0].State)
	c := st.FindContainerStatusByName("main")
	require.Equal(t, st.SandboxStatuses[0].ID, c.SandboxID)
	require.Equal(t, runtime.ContainerStateRunning, c.State)
}

func TestSandboxFailureIsReported(t *testing.T) {
	e := newFakeEnv(t)
	e.srv.FailNext("RunPodSandbox", errorString("cni failed"))
	res := e.sync(t, newPod("sbfail", "busybox:1"), nil)
	require.ErrorIs(t, res.Error(), runtime.ErrCreatePodSandbox)
	require.Contains(t, res.Error().Error(), "cni failed")
	require.Zero(t, e.srv.Calls("CreateContainer"))
}

func TestContainerFailuresAreReported(t *testing.T) {
	for _, tt := range []struct {
		method string
		want   error
	}{
		{"CreateContainer", runtime.ErrCreateContainer},
		{"StartContainer", runtime.ErrRunContainer},
		{"ImageStatus", runtime.ErrImageInspect},
	} {
		t.Run(tt.method, func(t *testing.T) {
			e := newFakeEnv(t)
			e.srv.FailNext(tt.method, errorString("boom"))
			res := e.sync(t, newPod("cfail", "busybox:1"), nil)
			require.ErrorIs(t, res.Error(), tt.want)
		})
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestEphemeralContainerStartsOnce(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("eph", "busybox:1")
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
		Name: "debug", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent}}}
	res = e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	require.Equal(t, []string{"StartContainer debug"}, steps(res))
	ids := e.srv.ContainerIDs("debug")
	require.Len(t, ids, 1)
	e.srv.Runtime.Lock()
	require.Equal(t, "ephemeral", e.srv.Runtime.Containers[ids[0]].Annotations["io.kubernetes.container.type"])
	e.srv.Runtime.Unlock()

	require.NoError(t, e.srv.Exit(ids[0], 1))
	res = e.sync(t, pod, nil)
	require.Empty(t, steps(res), "an exited ephemeral container is not restarted")
}

func TestContainerInUnknownStateIsKilledBeforeRestart(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("unknown", "busybox:1")
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	id := e.srv.ContainerIDs("main")[0]
	e.srv.Runtime.Lock()
	e.srv.Runtime.Containers[id].State = 3 // CONTAINER_UNKNOWN
	e.srv.Runtime.Unlock()
	st := e.status(t, pod)
	require.Equal(t, runtime.ContainerStateUnknown, st.FindContainerStatusByName("main").State)

	res = e.m.SyncPod(e.ctx, pod, st, nil, nil)
	require.NoError(t, res.Error())
	require.Equal(t, []string{"KillContainer main", "StartContainer main"}, steps(res))
	_, stopped := e.srv.StopTimeout(id)
	require.True(t, stopped, "the unknown container got a StopContainer")
	require.Len(t, e.srv.ContainerIDs("main"), 2)
}

func TestPodsSyncConcurrently(t *testing.T) {
	e := newFakeEnv(t, func(c *cri.Config) { c.MaxParallelImagePulls = 2 })
	const n = 8
	done := make(chan error, n)
	for i := range n {
		go func() {
			pod := newPod(fmt.Sprintf("c%d", i), "", withImage(fmt.Sprintf("img%d:1", i%3), v1.PullIfNotPresent))
			st, err := e.m.GetPodStatus(e.ctx, pod.UID, pod.Name, pod.Namespace)
			if err != nil {
				done <- err
				return
			}
			res := e.m.SyncPod(e.ctx, pod, st, nil, nil)
			done <- res.Error()
		}()
	}
	for range n {
		_, err := e.m.GetPods(e.ctx, true)
		require.NoError(t, err)
		require.NoError(t, <-done)
	}
	pods, err := e.m.GetPods(e.ctx, false)
	require.NoError(t, err)
	require.Len(t, pods, n)
	for _, p := range pods {
		require.Len(t, p.Containers, 1)
		require.Equal(t, runtime.ContainerStateRunning, p.Containers[0].State)
	}
}
