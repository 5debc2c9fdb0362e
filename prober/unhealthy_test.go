package prober

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

type setCall struct {
	kind  string
	id    runtime.ContainerID
	value bool
}

type fakeSetter struct{ calls []setCall }

func (f *fakeSetter) SetContainerReadiness(_ types.UID, id runtime.ContainerID, ready bool) {
	f.calls = append(f.calls, setCall{"readiness", id, ready})
}

func (f *fakeSetter) SetContainerStartup(_ types.UID, id runtime.ContainerID, started bool) {
	f.calls = append(f.calls, setCall{"startup", id, started})
}

// TestApplyUpdate: what the kubelet's sync loop does with each probe
// result: readiness and startup verdicts set the container's Ready and
// Started and resync the pod; a liveness failure resyncs it (the sync
// kills the container); a liveness success does nothing.
func TestApplyUpdate(t *testing.T) {
	id := runtime.ContainerID{Type: "fake", ID: "c1"}
	cases := []struct {
		name       string
		u          Update
		wantCalls  []setCall
		wantResync bool
	}{
		{"readiness success makes the container ready", Update{Type: Readiness, ContainerID: id, Result: Success}, []setCall{{"readiness", id, true}}, true},
		{"readiness failure makes the container not ready", Update{Type: Readiness, ContainerID: id, Result: Failure}, []setCall{{"readiness", id, false}}, true},
		{"startup success marks the container started", Update{Type: Startup, ContainerID: id, Result: Success}, []setCall{{"startup", id, true}}, true},
		{"startup failure leaves it not started, and the sync kills it", Update{Type: Startup, ContainerID: id, Result: Failure}, []setCall{{"startup", id, false}}, true},
		{"liveness failure resyncs the pod, whose sync kills the container", Update{Type: Liveness, ContainerID: id, Result: Failure}, nil, true},
		{"liveness success changes nothing", Update{Type: Liveness, ContainerID: id, Result: Success}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &fakeSetter{}
			assert.Equal(t, tc.wantResync, ApplyUpdate(s, tc.u))
			assert.Equal(t, tc.wantCalls, s.calls)
		})
	}
}

type kill struct {
	container string
	grace     *int64
	msg       string
}

type fakeKiller struct {
	kills []kill
	err   error
}

func (f *fakeKiller) KillPod(ctx context.Context, _ *v1.Pod, rp runtime.Pod, grace *int64) error {
	if f.err != nil {
		return f.err
	}
	f.kills = append(f.kills, kill{rp.Containers[0].Name, grace, runtime.KillMessage(ctx)})
	return nil
}

// TestKillUnhealthy: the containers a failed liveness or startup probe
// condemns are killed one by one with the kubelet's messages and the
// probe's grace period, as its computePodActions; running containers
// only, none of a pod being deleted.
func TestKillUnhealthy(t *testing.T) {
	ten, never, always := int64(10), v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyAlways
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	graceProbe := probe.DeepCopy()
	graceProbe.TerminationGracePeriodSeconds = &ten
	pod := func() *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"}, Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "side", RestartPolicy: &always, StartupProbe: probe}},
			Containers: []v1.Container{{Name: "live", LivenessProbe: graceProbe}, {Name: "start", StartupProbe: probe},
				{Name: "once", RestartPolicy: &never, LivenessProbe: probe}, {Name: "fine", LivenessProbe: probe}, {Name: "exited", LivenessProbe: probe}},
		}}
	}
	ids := map[string]runtime.ContainerID{}
	rs := &runtime.PodStatus{ID: "uid"}
	for _, name := range []string{"side", "live", "start", "once", "fine", "exited"} {
		ids[name] = runtime.ContainerID{Type: "fake", ID: name}
		st := runtime.ContainerStateRunning
		if name == "exited" {
			st = runtime.ContainerStateExited
		}
		rs.ContainerStatuses = append(rs.ContainerStatuses, &runtime.ContainerStatus{ID: ids[name], Name: name, State: st})
	}
	m, err := New(Config{Status: &fakeStatus{}})
	require.NoError(t, err)
	m.results.set(Startup, ids["side"], "uid", Failure)
	m.results.set(Liveness, ids["live"], "uid", Failure)
	m.results.set(Startup, ids["start"], "uid", Failure)
	m.results.set(Liveness, ids["once"], "uid", Failure)
	m.results.set(Liveness, ids["fine"], "uid", Success)
	m.results.set(Liveness, ids["exited"], "uid", Failure)

	k := &fakeKiller{}
	killed, err := m.KillUnhealthy(t.Context(), k, pod(), rs)
	require.NoError(t, err)
	assert.Equal(t, []kill{
		{"side", nil, "Init container side failed startup probe"},
		{"live", &ten, "Container live failed liveness probe, will be restarted"},
		{"start", nil, "Container start failed startup probe, will be restarted"},
		{"once", nil, "Container once failed liveness probe"},
	}, k.kills)
	require.Len(t, killed, 4)
	assert.Equal(t, Startup, killed[0].Probe)
	assert.Equal(t, Liveness, killed[1].Probe)

	t.Run("the pod's deletion grace period wins over the probe's", func(t *testing.T) {
		p := pod()
		p.DeletionGracePeriodSeconds = &ten
		assert.Nil(t, m.Unhealthy(p, rs)[1].GracePeriod)
	})
	t.Run("nothing of a pod being deleted", func(t *testing.T) {
		p := pod()
		p.DeletionTimestamp = &metav1.Time{}
		assert.Empty(t, m.Unhealthy(p, rs))
	})
	t.Run("a failed kill stops and says which", func(t *testing.T) {
		killed, err := m.KillUnhealthy(t.Context(), &fakeKiller{err: errors.New("runtime down")}, pod(), rs)
		assert.Empty(t, killed)
		assert.ErrorContains(t, err, "prober: kill container side after its failed startup probe: runtime down")
	})
}
