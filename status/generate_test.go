package status

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
)

var gt0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func genPod(policy v1.RestartPolicy, names ...string) *v1.Pod {
	p := phasePod(policy, nil, names...)
	p.UID = "uid1"
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Image = "img-" + p.Spec.Containers[i].Name
	}
	return p
}

func readySandbox() *runtime.SandboxStatus {
	return &runtime.SandboxStatus{ID: "sb1", State: runtime.SandboxStateReady, CreatedAt: gt0, IPs: []string{"10.0.0.5"}}
}

func rcs(name, id string, state runtime.ContainerState, created time.Time, exit int, restarts int) *runtime.ContainerStatus {
	return &runtime.ContainerStatus{
		ID: runtime.ContainerID{Type: "cri", ID: id}, Name: name, State: state,
		CreatedAt: created, StartedAt: created, ExitCode: exit, RestartCount: restarts,
		Image: "img-" + name, ImageID: "sha256:" + name,
	}
}

func condMap(st v1.PodStatus) map[v1.PodConditionType]v1.ConditionStatus {
	m := map[v1.PodConditionType]v1.ConditionStatus{}
	for _, c := range st.Conditions {
		m[c.Type] = c.Status
	}
	return m
}

func TestGenerateRunningPod(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, "b", "a")
	rs := &runtime.PodStatus{
		ID: pod.UID, IPs: []string{"10.0.0.5"},
		SandboxStatuses: []*runtime.SandboxStatus{readySandbox()},
		ContainerStatuses: []*runtime.ContainerStatus{
			rcs("a", "a1", runtime.ContainerStateRunning, gt0.Add(time.Second), 0, 0),
			rcs("b", "b1", runtime.ContainerStateRunning, gt0.Add(time.Second), 0, 0),
		},
	}
	st := GeneratePodStatus(pod, rs, nil, GenerateOptions{HostIPs: []string{"192.168.0.1"}})

	assert.Equal(t, v1.PodRunning, st.Phase)
	assert.Equal(t, map[v1.PodConditionType]v1.ConditionStatus{
		v1.PodReadyToStartContainers: v1.ConditionTrue,
		v1.PodInitialized:            v1.ConditionTrue,
		v1.PodReady:                  v1.ConditionTrue,
		v1.ContainersReady:           v1.ConditionTrue,
		v1.PodScheduled:              v1.ConditionTrue,
	}, condMap(st))
	assert.Equal(t, "10.0.0.5", st.PodIP)
	assert.Equal(t, []v1.PodIP{{IP: "10.0.0.5"}}, st.PodIPs)
	assert.Equal(t, "192.168.0.1", st.HostIP)
	assert.Equal(t, v1.PodQOSBestEffort, st.QOSClass)
	require.Len(t, st.ContainerStatuses, 2)
	assert.Equal(t, "a", st.ContainerStatuses[0].Name, "sorted by name")
	a := st.ContainerStatuses[0]
	assert.Equal(t, "cri://a1", a.ContainerID)
	assert.Equal(t, "img-a", a.Image)
	assert.Equal(t, "sha256:a", a.ImageID)
	assert.True(t, a.Ready)
	require.NotNil(t, a.Started)
	assert.True(t, *a.Started)
	require.NotNil(t, a.State.Running)
	assert.Equal(t, gt0.Add(time.Second), a.State.Running.StartedAt.Time)
}

func TestGenerateWaitingReasons(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		runtime   []*runtime.ContainerStatus
		wantPhase v1.PodPhase
		wantLast  bool
	}{
		{name: "crash looping container waits in CrashLoopBackOff", err: runtime.ErrCrashLoopBackOff,
			runtime:   []*runtime.ContainerStatus{rcs("a", "a1", runtime.ContainerStateExited, gt0, 1, 3)},
			wantPhase: v1.PodRunning, wantLast: true},
		{name: "image pull back-off", err: runtime.ErrImagePullBackOff, wantPhase: v1.PodPending},
		{name: "image pull error", err: runtime.ErrImagePull, wantPhase: v1.PodPending},
		{name: "container config error", err: runtime.ErrCreateContainerConfig, wantPhase: v1.PodPending},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := genPod(v1.RestartPolicyAlways, "a")
			reasons := NewReasonCache()
			var res runtime.PodSyncResult
			res.NewStep(runtime.StartContainer, "a").Fail(fmt.Errorf("starting a: %w", tc.err), "back-off 40s")
			reasons.Update(pod.UID, res)
			rs := &runtime.PodStatus{ID: pod.UID, SandboxStatuses: []*runtime.SandboxStatus{readySandbox()}, ContainerStatuses: tc.runtime}

			st := GeneratePodStatus(pod, rs, nil, GenerateOptions{Reasons: reasons})
			c := st.ContainerStatuses[0]
			require.NotNil(t, c.State.Waiting)
			assert.Equal(t, tc.err.Error(), c.State.Waiting.Reason)
			assert.Equal(t, "back-off 40s", c.State.Waiting.Message)
			assert.Equal(t, tc.wantPhase, st.Phase)
			assert.Equal(t, tc.wantLast, c.LastTerminationState.Terminated != nil, "last state")
			if tc.wantLast {
				assert.EqualValues(t, 1, c.LastTerminationState.Terminated.ExitCode)
				assert.EqualValues(t, 3, c.RestartCount)
			}
			assert.False(t, c.Ready)
			assert.Equal(t, v1.ConditionFalse, condMap(st)[v1.PodReady])

			// A later successful start clears the reason.
			var ok runtime.PodSyncResult
			ok.NewStep(runtime.StartContainer, "a")
			reasons.Update(pod.UID, ok)
			st = GeneratePodStatus(pod, rs, nil, GenerateOptions{Reasons: reasons})
			assert.NotEqual(t, tc.err.Error(), reasonOf(st.ContainerStatuses[0]))
		})
	}
}

// The sync that finds a container's exit held back by its crash-loop
// back-off writes the CrashLoopBackOff wait itself (GenerateOptions.BackOff)
// rather than leaving it to a later sync's reason cache, which would come
// when the back-off ends, with the restart.
func TestGenerateCrashLoopBackOffWhileTheBackOffHoldsTheExit(t *testing.T) {
	cases := []struct {
		name              string
		policy            v1.RestartPolicy
		since             time.Duration // from the exit to the status
		restarts          int           // admitted restarts before the exit (Next calls)
		noBackOff, cached bool
		want              string // waiting reason; "" means the exit is shown terminated
		wantMsg           string
	}{
		{name: "an exit within its back-off waits in CrashLoopBackOff at once", policy: v1.RestartPolicyAlways, since: 0, restarts: 1,
			want: "CrashLoopBackOff", wantMsg: "back-off 10s restarting failed container=a pod=p_default(uid1)"},
		{name: "the message gives the delay the exit waits out", policy: v1.RestartPolicyAlways, since: 5 * time.Second, restarts: 2,
			want: "CrashLoopBackOff", wantMsg: "back-off 20s restarting failed container=a pod=p_default(uid1)"},
		{name: "a first exit restarts at once and shows its termination", policy: v1.RestartPolicyAlways, restarts: 0},
		{name: "an exit whose back-off has passed shows its termination", policy: v1.RestartPolicyAlways, since: 10 * time.Second, restarts: 1},
		{name: "a container that will not restart shows its termination", policy: v1.RestartPolicyNever, restarts: 1},
		{name: "without the back-off only the reason cache counts", policy: v1.RestartPolicyAlways, restarts: 1, noBackOff: true},
		{name: "the reason cache comes first", policy: v1.RestartPolicyAlways, restarts: 1, cached: true,
			want: "CreateContainerError", wantMsg: "bad mount"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := genPod(tc.policy, "a")
			pod.Name, pod.Namespace = "p", "default"
			exit := rcs("a", "a1", runtime.ContainerStateExited, gt0, 1, tc.restarts)
			exit.FinishedAt = gt0
			rs := &runtime.PodStatus{ID: pod.UID, SandboxStatuses: []*runtime.SandboxStatus{readySandbox()}, ContainerStatuses: []*runtime.ContainerStatus{exit}}
			clk := clocktesting.NewFakePassiveClock(gt0.Add(-time.Minute))
			b := runtime.NewBackoff(10*time.Second, 5*time.Minute, 0, clk)
			for range tc.restarts {
				b.Next(runtime.BackoffKey(pod, &pod.Spec.Containers[0]), clk.Now())
			}
			clk.SetTime(gt0.Add(tc.since))
			opts := GenerateOptions{Reasons: NewReasonCache(), BackOff: b}
			if tc.noBackOff {
				opts.BackOff = nil
			}
			if tc.cached {
				var res runtime.PodSyncResult
				res.NewStep(runtime.StartContainer, "a").Fail(runtime.ErrCreateContainer, "bad mount")
				opts.Reasons.Update(pod.UID, res)
			}

			c := GeneratePodStatus(pod, rs, nil, opts).ContainerStatuses[0]
			if tc.want == "" {
				require.NotNil(t, c.State.Terminated, "state %+v", c.State)
				assert.EqualValues(t, 1, c.State.Terminated.ExitCode)
				return
			}
			require.NotNil(t, c.State.Waiting, "state %+v", c.State)
			assert.Equal(t, tc.want, c.State.Waiting.Reason)
			assert.Equal(t, tc.wantMsg, c.State.Waiting.Message)
			require.NotNil(t, c.LastTerminationState.Terminated, "the exit is the last state")
			assert.EqualValues(t, 1, c.LastTerminationState.Terminated.ExitCode)
		})
	}
}

func reasonOf(c v1.ContainerStatus) string {
	if c.State.Waiting != nil {
		return c.State.Waiting.Reason
	}
	return ""
}

func TestGenerateWaitingReasonNotShownForContainersThatWillNotRestart(t *testing.T) {
	pod := genPod(v1.RestartPolicyNever, "a")
	reasons := NewReasonCache()
	var res runtime.PodSyncResult
	res.NewStep(runtime.StartContainer, "a").Fail(runtime.ErrCrashLoopBackOff, "")
	reasons.Update(pod.UID, res)
	rs := &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{rcs("a", "a1", runtime.ContainerStateExited, gt0, 1, 0)}}
	st := GeneratePodStatus(pod, rs, nil, GenerateOptions{Reasons: reasons})
	require.NotNil(t, st.ContainerStatuses[0].State.Terminated)
	assert.Equal(t, v1.PodFailed, st.Phase)
}

func TestGenerateRestartedContainerShowsLastState(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, "a")
	old := rcs("a", "a1", runtime.ContainerStateExited, gt0, 2, 0)
	old.Reason = "Error"
	rs := &runtime.PodStatus{
		SandboxStatuses: []*runtime.SandboxStatus{readySandbox()},
		ContainerStatuses: []*runtime.ContainerStatus{
			old, rcs("a", "a2", runtime.ContainerStateRunning, gt0.Add(time.Minute), 0, 1),
		},
	}
	st := GeneratePodStatus(pod, rs, nil, GenerateOptions{})
	c := st.ContainerStatuses[0]
	assert.Equal(t, "cri://a2", c.ContainerID, "the newest instance")
	assert.EqualValues(t, 1, c.RestartCount)
	require.NotNil(t, c.LastTerminationState.Terminated)
	assert.Equal(t, "Error", c.LastTerminationState.Terminated.Reason)
	assert.EqualValues(t, 2, c.LastTerminationState.Terminated.ExitCode)
	assert.Equal(t, "cri://a1", c.LastTerminationState.Terminated.ContainerID)
}

func TestGenerateContainerThatVanishedAfterRunning(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, "a")
	prev := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{
		Name: "a", ContainerID: "cri://a1", RestartCount: 4,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
	}}}
	st := GeneratePodStatus(pod, &runtime.PodStatus{}, &prev, GenerateOptions{})
	c := st.ContainerStatuses[0]
	require.NotNil(t, c.State.Waiting)
	require.NotNil(t, c.LastTerminationState.Terminated)
	assert.Equal(t, ContainerStatusUnknown, c.LastTerminationState.Terminated.Reason)
	assert.EqualValues(t, 137, c.LastTerminationState.Terminated.ExitCode)
	assert.EqualValues(t, 5, c.RestartCount)
	assert.Equal(t, v1.PodRunning, st.Phase, "a container that ran is not back to Pending")

	t.Run("unknown state of a running container is terminated", func(t *testing.T) {
		rs := &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{rcs("a", "a1", runtime.ContainerStateUnknown, gt0, 0, 4)}}
		st := GeneratePodStatus(pod, rs, &prev, GenerateOptions{})
		c := st.ContainerStatuses[0]
		require.NotNil(t, c.State.Terminated)
		assert.Equal(t, ContainerStatusUnknown, c.State.Terminated.Reason)
		assert.EqualValues(t, 5, c.RestartCount)
	})
}

func TestGenerateProbes(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, "a")
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{}
	rs := &runtime.PodStatus{
		SandboxStatuses:   []*runtime.SandboxStatus{readySandbox()},
		ContainerStatuses: []*runtime.ContainerStatus{rcs("a", "a1", runtime.ContainerStateRunning, gt0, 0, 0)},
	}
	cases := []struct {
		name string
		old  *v1.PodStatus
		want bool
	}{
		{name: "not ready until the prober says so", want: false},
		{name: "the prober's verdict for the same container is kept", want: true,
			old: &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "cri://a1", Ready: true}}}},
		{name: "the verdict for an older instance is not", want: false,
			old: &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "cri://a0", Ready: true}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := GeneratePodStatus(pod, rs, tc.old, GenerateOptions{})
			assert.Equal(t, tc.want, st.ContainerStatuses[0].Ready)
			assert.Equal(t, tc.want, condMap(st)[v1.PodReady] == v1.ConditionTrue)
		})
	}
}

func TestGenerateInitContainers(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, "a")
	pod.Spec.InitContainers = []v1.Container{{Name: "i1"}, {Name: "i2"}}
	rs := &runtime.PodStatus{
		SandboxStatuses: []*runtime.SandboxStatus{readySandbox()},
		ContainerStatuses: []*runtime.ContainerStatus{
			rcs("i1", "i1a", runtime.ContainerStateExited, gt0, 0, 0),
			rcs("i2", "i2a", runtime.ContainerStateRunning, gt0.Add(time.Second), 0, 0),
		},
	}
	st := GeneratePodStatus(pod, rs, nil, GenerateOptions{})
	assert.Equal(t, v1.PodPending, st.Phase)
	require.Len(t, st.InitContainerStatuses, 2)
	assert.Equal(t, "i1", st.InitContainerStatuses[0].Name, "init containers in spec order")
	assert.True(t, st.InitContainerStatuses[0].Ready, "a completed init container is ready")
	assert.False(t, st.InitContainerStatuses[1].Ready)
	assert.Equal(t, PodInitializing, st.ContainerStatuses[0].State.Waiting.Reason)
	_, init := findCondition(st.Conditions, v1.PodInitialized)
	assert.Equal(t, v1.ConditionFalse, init.Status)
	assert.Equal(t, ContainersNotInitialized, init.Reason)
	assert.Equal(t, "containers with incomplete status: [i2]", init.Message)
}

func TestGenerateKeepsTerminalPhaseAndOthersConditions(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, "a")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	pod.Status = v1.PodStatus{
		Phase: v1.PodSucceeded, Reason: "Done",
		Conditions: []v1.PodCondition{
			{Type: "example.com/gate", Status: v1.ConditionFalse},
			{Type: v1.PodReady, Status: v1.ConditionTrue},
		},
	}
	rs := &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{rcs("a", "a1", runtime.ContainerStateRunning, gt0, 0, 0)}}
	st := GeneratePodStatus(pod, rs, nil, GenerateOptions{})
	assert.Equal(t, v1.PodSucceeded, st.Phase, "the apiserver's terminal phase is kept")
	assert.Equal(t, "Done", st.Reason)
	assert.Equal(t, v1.ConditionFalse, condMap(st)["example.com/gate"], "others' conditions kept")
	n := 0
	for _, c := range st.Conditions {
		if c.Type == v1.PodReady {
			n++
		}
	}
	assert.Equal(t, 1, n, "the agent's conditions replace the apiserver's")
}

func TestGenerateReadinessGates(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, "a")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	rs := &runtime.PodStatus{
		SandboxStatuses:   []*runtime.SandboxStatus{readySandbox()},
		ContainerStatuses: []*runtime.ContainerStatus{rcs("a", "a1", runtime.ContainerStateRunning, gt0, 0, 0)},
	}
	st := GeneratePodStatus(pod, rs, nil, GenerateOptions{})
	_, ready := findCondition(st.Conditions, v1.PodReady)
	assert.Equal(t, v1.ConditionFalse, ready.Status)
	assert.Equal(t, ReadinessGatesNotReady, ready.Reason)
	assert.Equal(t, v1.ConditionTrue, condMap(st)[v1.ContainersReady])

	pod.Status.Conditions = []v1.PodCondition{{Type: "example.com/gate", Status: v1.ConditionTrue}}
	st = GeneratePodStatus(pod, rs, nil, GenerateOptions{})
	assert.Equal(t, v1.ConditionTrue, condMap(st)[v1.PodReady])
}

func TestGenerateHostNetworkPodGetsHostIPs(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, "a")
	pod.Spec.HostNetwork = true
	sb := readySandbox()
	sb.HostNetwork, sb.IPs = true, nil
	rs := &runtime.PodStatus{SandboxStatuses: []*runtime.SandboxStatus{sb}}
	st := GeneratePodStatus(pod, rs, nil, GenerateOptions{HostIPs: []string{"192.168.0.1", "fd00::1"}})
	assert.Equal(t, "192.168.0.1", st.PodIP)
	assert.Equal(t, []v1.PodIP{{IP: "192.168.0.1"}, {IP: "fd00::1"}}, st.PodIPs)
	assert.Equal(t, []v1.HostIP{{IP: "192.168.0.1"}, {IP: "fd00::1"}}, st.HostIPs)
	assert.Equal(t, v1.ConditionTrue, condMap(st)[v1.PodReadyToStartContainers])
}

func TestSandboxReady(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, "a")
	notReady := readySandbox()
	notReady.State = runtime.SandboxStateNotReady
	noIP := readySandbox()
	noIP.IPs = nil
	cases := []struct {
		name string
		rs   *runtime.PodStatus
		want bool
	}{
		{name: "no sandbox and nothing running", rs: &runtime.PodStatus{}, want: false},
		{name: "no sandbox but a running container", want: true,
			rs: &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{rcs("a", "a1", runtime.ContainerStateRunning, gt0, 0, 0)}}},
		{name: "ready sandbox with IP", rs: &runtime.PodStatus{SandboxStatuses: []*runtime.SandboxStatus{readySandbox()}}, want: true},
		{name: "newest sandbox not ready", rs: &runtime.PodStatus{SandboxStatuses: []*runtime.SandboxStatus{notReady, readySandbox()}}, want: false},
		{name: "two ready sandboxes", rs: &runtime.PodStatus{SandboxStatuses: []*runtime.SandboxStatus{readySandbox(), readySandbox()}}, want: false},
		{name: "sandbox without IP", rs: &runtime.PodStatus{SandboxStatuses: []*runtime.SandboxStatus{noIP}}, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, sandboxReady(pod, tc.rs))
		})
	}
}

func TestGeneratedQOSClass(t *testing.T) {
	rl := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	pod := func(req, lim v1.ResourceList, qos v1.PodQOSClass) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}}},
			Status: v1.PodStatus{QOSClass: qos}}
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		old  v1.PodQOSClass
		want v1.PodQOSClass
	}{
		{"no requests or limits is BestEffort", pod(nil, nil, ""), "", v1.PodQOSBestEffort},
		{"requests equal to limits is Guaranteed", pod(rl("1", "1Gi"), rl("1", "1Gi"), ""), "", v1.PodQOSGuaranteed},
		{"requests below limits is Burstable", pod(rl("500m", "1Gi"), rl("1", "1Gi"), ""), "", v1.PodQOSBurstable},
		{"a cpu request alone is Burstable", pod(rl("1", ""), nil, ""), "", v1.PodQOSBurstable},
		{"the apiserver's class wins over the spec", pod(nil, nil, v1.PodQOSBurstable), "", v1.PodQOSBurstable},
		{"the old status's class wins over the pod's", pod(nil, nil, v1.PodQOSBurstable), v1.PodQOSGuaranteed, v1.PodQOSGuaranteed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := GeneratePodStatus(tc.pod, nil, &v1.PodStatus{QOSClass: tc.old}, GenerateOptions{})
			assert.Equal(t, tc.want, st.QOSClass)
		})
	}
}

func TestReasonCacheFallsBackForUnknownErrors(t *testing.T) {
	c := NewReasonCache()
	var res runtime.PodSyncResult
	res.NewStep(runtime.StartContainer, "a").Fail(errors.New("boom"), "")
	res.NewStep(runtime.KillContainer, "b").Fail(runtime.ErrKillContainer, "")
	c.Update("uid1", res)
	reason, msg, ok := c.Get("uid1", "a")
	require.True(t, ok)
	assert.Equal(t, "RunContainerError", reason)
	assert.Equal(t, "boom", msg)
	_, _, ok = c.Get("uid1", "b")
	assert.False(t, ok, "only start steps count")
	c.Remove("uid1")
	_, _, ok = c.Get("uid1", "a")
	assert.False(t, ok)
}

func TestMergePodStatus(t *testing.T) {
	now := metav1.NewTime(gt0)
	base := func() v1.PodStatus {
		return v1.PodStatus{Phase: v1.PodRunning, Message: "Message", Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: v1.PodScheduled, Status: v1.ConditionTrue},
		}}
	}
	same := func(s v1.PodStatus) v1.PodStatus { return s }
	withCond := func(t v1.PodConditionType, st v1.ConditionStatus, reason string) func(v1.PodStatus) v1.PodStatus {
		return func(s v1.PodStatus) v1.PodStatus {
			s.Conditions = append(s.Conditions, v1.PodCondition{Type: t, Status: st, Reason: reason})
			return s
		}
	}
	failedWith := func(reason string) func(v1.PodStatus) v1.PodStatus {
		return func(s v1.PodStatus) v1.PodStatus {
			s.Phase = v1.PodFailed
			s.Conditions = append(s.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: reason})
			return s
		}
	}
	type cond struct {
		status v1.ConditionStatus
		reason string
	}
	runningConds := map[v1.PodConditionType]cond{v1.PodReady: {v1.ConditionTrue, ""}, v1.PodScheduled: {v1.ConditionTrue, ""}}
	failedConds := func(extra map[v1.PodConditionType]cond) map[v1.PodConditionType]cond {
		m := map[v1.PodConditionType]cond{
			v1.PodReady: {v1.ConditionFalse, PodFailed}, v1.ContainersReady: {v1.ConditionFalse, PodFailed},
			v1.PodScheduled: {v1.ConditionTrue, ""},
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	plus := func(m map[v1.PodConditionType]cond, t v1.PodConditionType, c cond) map[v1.PodConditionType]cond {
		out := map[v1.PodConditionType]cond{t: c}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name       string
		couldRun   bool
		api        func(v1.PodStatus) v1.PodStatus
		status     func(v1.PodStatus) v1.PodStatus
		wantPhase  v1.PodPhase
		wantReason string
		wantConds  map[v1.PodConditionType]cond
	}{
		{name: "no change", api: same, status: same, wantPhase: v1.PodRunning, wantConds: runningConds},
		{name: "disruption condition added with the failed phase", api: same, status: failedWith("TerminationByKubelet"),
			wantPhase: v1.PodFailed, wantConds: failedConds(map[v1.PodConditionType]cond{v1.DisruptionTarget: {v1.ConditionTrue, "TerminationByKubelet"}})},
		{name: "no disruption condition while containers could run", couldRun: true, api: same, status: failedWith("TerminationByKubelet"),
			wantPhase: v1.PodRunning, wantConds: runningConds},
		{name: "disruption condition of others is kept", api: withCond(v1.DisruptionTarget, v1.ConditionTrue, "TerminationByKubelet"), status: same,
			wantPhase: v1.PodRunning, wantConds: plus(runningConds, v1.DisruptionTarget, cond{v1.ConditionTrue, "TerminationByKubelet"})},
		{name: "disruption condition replaced with the failed phase", api: withCond(v1.DisruptionTarget, v1.ConditionTrue, "EvictedByEvictionAPI"),
			status: failedWith("TerminationByKubelet"), wantPhase: v1.PodFailed,
			wantConds: failedConds(map[v1.PodConditionType]cond{v1.DisruptionTarget: {v1.ConditionTrue, "TerminationByKubelet"}})},
		{name: "disruption condition not replaced while running", api: withCond(v1.DisruptionTarget, v1.ConditionTrue, "EvictedByEvictionAPI"),
			status: withCond(v1.DisruptionTarget, v1.ConditionTrue, "TerminationByKubelet"), wantPhase: v1.PodRunning,
			wantConds: plus(runningConds, v1.DisruptionTarget, cond{v1.ConditionTrue, "EvictedByEvictionAPI"})},
		{name: "disruption condition not replaced while containers could run", couldRun: true,
			api: withCond(v1.DisruptionTarget, v1.ConditionTrue, "EvictedByEvictionAPI"), status: failedWith("TerminationByKubelet"),
			wantPhase: v1.PodRunning, wantConds: plus(runningConds, v1.DisruptionTarget, cond{v1.ConditionTrue, "EvictedByEvictionAPI"})},
		{name: "readiness changes", api: same,
			status:    func(s v1.PodStatus) v1.PodStatus { s.Conditions[0].Status = v1.ConditionFalse; return s },
			wantPhase: v1.PodRunning, wantConds: map[v1.PodConditionType]cond{v1.PodReady: {v1.ConditionFalse, ""}, v1.PodScheduled: {v1.ConditionTrue, ""}}},
		{name: "others' condition is kept", api: withCond("example.com/feature", v1.ConditionTrue, ""), status: same,
			wantPhase: v1.PodRunning, wantConds: plus(runningConds, "example.com/feature", cond{v1.ConditionTrue, ""})},
		{name: "others' condition is not changed by the agent", api: withCond("example.com/feature", v1.ConditionTrue, ""),
			status:    withCond("example.com/feature", v1.ConditionFalse, ""),
			wantPhase: v1.PodRunning, wantConds: plus(runningConds, "example.com/feature", cond{v1.ConditionTrue, ""})},
		{name: "failed phase with its reason when nothing runs",
			api: func(s v1.PodStatus) v1.PodStatus { s.Reason = "Unknown"; return s },
			status: func(s v1.PodStatus) v1.PodStatus {
				s.Phase, s.Reason, s.Message = v1.PodFailed, "Evicted", "Was Evicted"
				return s
			},
			wantPhase: v1.PodFailed, wantReason: "Evicted", wantConds: failedConds(nil)},
		{name: "failed phase held back with the old reason while containers could run", couldRun: true,
			api: func(s v1.PodStatus) v1.PodStatus { s.Reason = "Unknown"; return s },
			status: func(s v1.PodStatus) v1.PodStatus {
				s.Phase, s.Reason, s.Message = v1.PodFailed, "Evicted", "Was Evicted"
				return s
			},
			wantPhase: v1.PodRunning, wantReason: "Unknown", wantConds: runningConds},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api, st := tc.api(base()), tc.status(base())
			apiCopy, stCopy := api.DeepCopy(), st.DeepCopy()
			got := mergePodStatus(&api, &st, tc.couldRun, now)
			assert.Equal(t, tc.wantPhase, got.Phase)
			assert.Equal(t, tc.wantReason, got.Reason)
			conds := map[v1.PodConditionType]cond{}
			for _, c := range got.Conditions {
				_, dup := conds[c.Type]
				require.False(t, dup, "duplicate condition %s", c.Type)
				conds[c.Type] = cond{c.Status, c.Reason}
			}
			assert.Equal(t, tc.wantConds, conds)
			assert.Equal(t, apiCopy, &api, "api status not modified")
			assert.Equal(t, stCopy, &st, "status not modified")
		})
	}
}

func TestStatusNormalizationEnforcesMaxBytes(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways)
	st := v1.PodStatus{}
	for i := range 48 {
		name := fmt.Sprintf("c%02d", i)
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: name})
		term := &v1.ContainerStateTerminated{Message: strings.Repeat("x", 1024)}
		st.ContainerStatuses = append(st.ContainerStatuses, v1.ContainerStatus{Name: name,
			State: v1.ContainerState{Terminated: term}, LastTerminationState: v1.ContainerState{Terminated: term.DeepCopy()}})
	}
	normalizeStatus(pod, &st)
	for _, c := range st.ContainerStatuses {
		assert.Len(t, c.State.Terminated.Message, 256, "12 KiB shared by 48 containers")
		assert.Len(t, c.LastTerminationState.Terminated.Message, 256)
	}
}

func TestNormalizeStatusTruncatesTimesAndSorts(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways, "a", "b")
	pod.Spec.InitContainers = []v1.Container{{Name: "i1"}, {Name: "i2"}}
	ts := metav1.NewTime(gt0.Add(123 * time.Millisecond))
	st := v1.PodStatus{
		StartTime:             &ts,
		ContainerStatuses:     []v1.ContainerStatus{{Name: "b"}, {Name: "a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: ts}}}},
		InitContainerStatuses: []v1.ContainerStatus{{Name: "i2"}, {Name: "i1"}},
	}
	normalizeStatus(pod, &st)
	assert.Equal(t, gt0, st.StartTime.Time.UTC())
	assert.Equal(t, "a", st.ContainerStatuses[0].Name)
	assert.Equal(t, gt0, st.ContainerStatuses[0].State.Running.StartedAt.Time.UTC())
	assert.Equal(t, "i1", st.InitContainerStatuses[0].Name)
}

func TestStatusPatch(t *testing.T) {
	base := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
		{Type: "example.com/x", Status: v1.ConditionTrue},
		{Type: v1.PodReady, Status: v1.ConditionTrue},
	}}
	t.Run("no change is no patch", func(t *testing.T) {
		_, changed, err := statusPatch("uid1", &base, base.DeepCopy())
		require.NoError(t, err)
		assert.False(t, changed)
	})
	t.Run("changed fields and conditions only, with the UID", func(t *testing.T) {
		st := base.DeepCopy()
		st.Phase = v1.PodFailed
		st.Conditions = []v1.PodCondition{{Type: "example.com/x", Status: v1.ConditionTrue}}
		p, changed, err := statusPatch("uid1", &base, st)
		require.NoError(t, err)
		assert.True(t, changed)
		assert.JSONEq(t, `{"metadata":{"uid":"uid1"},"status":{"phase":"Failed",
			"conditions":[{"type":"Ready","$patch":"delete"}]}}`, string(p))
	})
}

func TestStatusEqualityIgnoresOrderAndOthersConditions(t *testing.T) {
	pod := genPod(v1.RestartPolicyAlways)
	var statuses []v1.ContainerStatus
	for i := range 10 {
		name := fmt.Sprintf("c%d", i)
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: name})
		statuses = append(statuses, v1.ContainerStatus{Name: name})
	}
	reversed := slices.Clone(statuses)
	slices.Reverse(reversed)
	a := v1.PodStatus{ContainerStatuses: statuses, InitContainerStatuses: slices.Clone(statuses), EphemeralContainerStatuses: slices.Clone(statuses)}
	b := v1.PodStatus{ContainerStatuses: reversed, InitContainerStatuses: slices.Clone(reversed), EphemeralContainerStatuses: slices.Clone(reversed)}
	normalizeStatus(pod, &a)
	normalizeStatus(pod, &b)
	assert.True(t, statusEqual(&a, &b), "order of container statuses")

	a.Conditions = []v1.PodCondition{{Type: "example.com/feature", Status: v1.ConditionTrue}}
	b.Conditions = []v1.PodCondition{{Type: "example.com/feature", Status: v1.ConditionFalse}}
	assert.True(t, statusEqual(&a, &b), "conditions of others")

	b.Conditions = append(b.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue})
	assert.False(t, statusEqual(&a, &b), "a condition of the agent")
	a.Conditions = append(a.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(gt0)})
	assert.True(t, statusEqual(&a, &b), "transition times do not count")
}

func TestConditions(t *testing.T) {
	ready := func(name string) v1.ContainerStatus { s := running(name); s.Ready = true; return s }
	spec := &v1.PodSpec{InitContainers: []v1.Container{{Name: "i1"}, sidecar("s1")}, Containers: []v1.Container{{Name: "a"}, {Name: "b"}}}
	initDone := stopped("i1", 0)
	initDone.Ready = true
	cs := func(s ...v1.ContainerStatus) []v1.ContainerStatus { return s }
	type want struct {
		status  v1.ConditionStatus
		reason  string
		message string
	}
	cases := []struct {
		name    string
		init    []v1.ContainerStatus
		regular []v1.ContainerStatus
		phase   v1.PodPhase
		cr      want
		init0   want
	}{
		{name: "no statuses at all", phase: v1.PodPending,
			cr:    want{v1.ConditionFalse, UnknownContainerStatuses, ""},
			init0: want{v1.ConditionFalse, UnknownContainerStatuses, ""}},
		{name: "an unready sidecar keeps the containers unready", phase: v1.PodRunning,
			init: cs(initDone, startedRunning("s1")), regular: cs(ready("a"), ready("b")),
			cr: want{v1.ConditionFalse, ContainersNotReady, "containers with unready status: [s1]"}, init0: want{v1.ConditionTrue, "", ""}},
		{name: "everything ready including the sidecar", phase: v1.PodRunning,
			init: cs(initDone, func() v1.ContainerStatus { s := startedRunning("s1"); s.Ready = true; return s }()), regular: cs(ready("a"), ready("b")),
			cr: want{v1.ConditionTrue, "", ""}, init0: want{v1.ConditionTrue, "", ""}},
		{name: "unknown and unready containers", phase: v1.PodPending,
			init: cs(initDone), regular: cs(running("a")),
			cr:    want{v1.ConditionFalse, ContainersNotReady, "containers with unknown status: [s1 b], containers with unready status: [a]"},
			init0: want{v1.ConditionTrue, "", ""}},
		{name: "init containers incomplete", phase: v1.PodPending,
			init: cs(running("i1"), running("s1")), regular: cs(waitingStatus("a"), waitingStatus("b")),
			cr:    want{v1.ConditionFalse, ContainersNotReady, "containers with unready status: [s1 a b]"},
			init0: want{v1.ConditionFalse, ContainersNotInitialized, "containers with incomplete status: [i1 s1]"}},
		{name: "restarting sidecar after a regular container started", phase: v1.PodRunning,
			init: cs(initDone, restarting("s1", 1)), regular: cs(ready("a"), ready("b")),
			cr: want{v1.ConditionFalse, ContainersNotReady, "containers with unready status: [s1]"}, init0: want{v1.ConditionTrue, "", ""}},
		{name: "succeeded pod", phase: v1.PodSucceeded,
			init: cs(initDone, stopped("s1", 0)), regular: cs(stopped("a", 0), stopped("b", 0)),
			cr: want{v1.ConditionFalse, PodCompleted, ""}, init0: want{v1.ConditionTrue, PodCompleted, ""}},
		{name: "failed pod", phase: v1.PodFailed,
			init: cs(initDone, startedRunning("s1")), regular: cs(ready("a"), stopped("b", 1)),
			cr: want{v1.ConditionFalse, PodFailed, ""}, init0: want{v1.ConditionTrue, "", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cr := containersReadyCondition(spec, tc.init, tc.regular, tc.phase)
			assert.Equal(t, tc.cr, want{cr.Status, cr.Reason, cr.Message}, "ContainersReady")
			pr := podReadyCondition(spec, nil, tc.init, tc.regular, tc.phase)
			assert.Equal(t, tc.cr, want{pr.Status, pr.Reason, pr.Message}, "Ready follows ContainersReady")
			assert.Equal(t, v1.PodReady, pr.Type)
			in := initializedCondition(spec, tc.init, tc.regular, tc.phase)
			assert.Equal(t, tc.init0, want{in.Status, in.Reason, in.Message}, "Initialized")
		})
	}
}

func TestGeneratePodIPsAsTheKubeletSortsThem(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodeIPs []string
		runtime []string
		podIP   string
		podIPs  []v1.PodIP
	}{
		{"IPv6 listed first on an IPv4 node: IPv4 is the pod IP", []string{"192.168.0.1"},
			[]string{"fd00::5", "10.0.0.5"}, "10.0.0.5", []v1.PodIP{{IP: "10.0.0.5"}, {IP: "fd00::5"}}},
		{"IPv4 listed first on an IPv6 node: IPv6 is the pod IP", []string{"fd00::1", "192.168.0.1"},
			[]string{"10.0.0.5", "fd00::5"}, "fd00::5", []v1.PodIP{{IP: "fd00::5"}, {IP: "10.0.0.5"}}},
		{"two IPs of one family: only the first is reported", []string{"192.168.0.1"},
			[]string{"10.0.0.5", "10.0.0.6"}, "10.0.0.5", []v1.PodIP{{IP: "10.0.0.5"}}},
		{"no node IPs: IPv4 is the primary family", nil,
			[]string{"fd00::5", "fd00::6", "10.0.0.5", "10.0.0.6"}, "10.0.0.5", []v1.PodIP{{IP: "10.0.0.5"}, {IP: "fd00::5"}}},
		{"only the secondary family: it is reported", []string{"192.168.0.1"},
			[]string{"fd00::5"}, "fd00::5", []v1.PodIP{{IP: "fd00::5"}}},
		{"unparsable IPs are dropped", []string{"192.168.0.1"},
			[]string{"bogus", "10.0.0.5"}, "10.0.0.5", []v1.PodIP{{IP: "10.0.0.5"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := genPod(v1.RestartPolicyAlways, "a")
			rs := &runtime.PodStatus{ID: pod.UID, IPs: tc.runtime, SandboxStatuses: []*runtime.SandboxStatus{readySandbox()}}
			st := GeneratePodStatus(pod, rs, nil, GenerateOptions{HostIPs: tc.nodeIPs})
			assert.Equal(t, tc.podIP, st.PodIP)
			assert.Equal(t, tc.podIPs, st.PodIPs)
		})
	}
}

// probeVerdicts is a ProbeResults from maps by container ID.
type probeVerdicts struct{ started, ready map[string]bool }

func (p probeVerdicts) Started(_ types.UID, _, id string) bool { return p.started[id] }
func (p probeVerdicts) Ready(_ types.UID, _, id string) bool   { return p.ready[id] }

func TestGenerateProbeResults(t *testing.T) {
	rs := &runtime.PodStatus{
		SandboxStatuses:   []*runtime.SandboxStatus{readySandbox()},
		ContainerStatuses: []*runtime.ContainerStatus{rcs("a", "a1", runtime.ContainerStateRunning, gt0, 0, 0)},
	}
	stale := &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "cri://a1", Ready: true, Started: ptr.To(true)}}}
	cases := []struct {
		name           string
		startup, ready bool
		probes         probeVerdicts
		wantStarted    bool
		wantReady      bool
	}{
		{name: "ready as the prober says", ready: true, probes: probeVerdicts{ready: map[string]bool{"cri://a1": true}},
			wantStarted: true, wantReady: true},
		{name: "not ready while the prober says no, whatever old says", ready: true, wantStarted: true},
		{name: "not started and not ready before the startup probe passes", startup: true, ready: true,
			probes: probeVerdicts{ready: map[string]bool{"cri://a1": true}}},
		{name: "started once the startup probe passed", startup: true,
			probes: probeVerdicts{started: map[string]bool{"cri://a1": true}}, wantStarted: true, wantReady: true},
		{name: "without probes running means started and ready", wantStarted: true, wantReady: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := genPod(v1.RestartPolicyAlways, "a")
			if tc.startup {
				pod.Spec.Containers[0].StartupProbe = &v1.Probe{}
			}
			if tc.ready {
				pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{}
			}
			st := GeneratePodStatus(pod, rs, stale, GenerateOptions{Probes: tc.probes})
			cs := st.ContainerStatuses[0]
			assert.Equal(t, tc.wantStarted, *cs.Started)
			assert.Equal(t, tc.wantReady, cs.Ready)
			assert.Equal(t, tc.wantReady, condMap(st)[v1.ContainersReady] == v1.ConditionTrue)
		})
	}
}
