package cri_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

func TestGarbageCollect(t *testing.T) {
	// crashed makes a pod whose main container has exited n times, the
	// instances a minute apart.
	crashed := func(t *testing.T, e *fakeEnv, name string, n int) {
		t.Helper()
		pod := newPod(name, "busybox:1")
		for range n {
			res := e.sync(t, pod, runtime.NewBackoff(time.Second, time.Second, 0, e.clock))
			require.NoError(t, res.Error())
			e.clock.Step(time.Minute)
		}
	}
	policy := func(minAge time.Duration, perPod, total int) runtime.GCPolicy {
		return runtime.GCPolicy{MinAge: minAge, MaxPerPodContainer: perPod, MaxContainers: total}
	}
	tests := []struct {
		name   string
		policy runtime.GCPolicy
		want   map[string]int // containers left per pod name
	}{
		{"keeps MaxPerPodContainer dead instances per container", policy(0, 1, -1), map[string]int{"a": 1, "b": 1}},
		// b's newest is younger than 90s: kept, and not counted.
		{"keeps younger than MinAge", policy(90*time.Second, 1, -1), map[string]int{"a": 1, "b": 2}},
		{"no limits keep everything", policy(0, -1, -1), map[string]int{"a": 4, "b": 2}},
		{"MaxContainers removes the oldest across pods", policy(0, -1, 4), map[string]int{"a": 2, "b": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEnv(t)
			e.srv.SetBehavior("main", fakecri.Behavior{ExitOnStart: true, ExitCode: 1})
			crashed(t, e, "a", 4)
			crashed(t, e, "b", 2)
			require.NoError(t, e.m.GarbageCollect(e.ctx, tt.policy, false))
			got := map[string]int{}
			for _, name := range []string{"a", "b"} {
				got[name] = len(e.status(t, newPod(name, "")).ContainerStatuses)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestGarbageCollectKilledPods(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("gone", "busybox:1")
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	pods, err := e.m.GetPods(e.ctx, false)
	require.NoError(t, err)
	require.NoError(t, e.m.KillPod(e.ctx, pod, *pods[0], nil))
	gc := runtime.GCPolicy{MaxPerPodContainer: 1, MaxContainers: -1}

	require.NoError(t, e.m.GarbageCollect(e.ctx, gc, false))
	all, err := e.m.GetPods(e.ctx, true)
	require.NoError(t, err)
	require.Len(t, all, 1, "not before all sources are ready")

	require.NoError(t, e.m.GarbageCollect(e.ctx, gc, true))
	all, err = e.m.GetPods(e.ctx, true)
	require.NoError(t, err)
	require.Empty(t, all, "a killed pod is removed")
	require.NoDirExists(t, filepath.Join(e.logs, "test_gone_uid-gone"), "with its logs")

	// A pod that was killed and then synced again is alive.
	live := newPod("back", "busybox:1")
	res = e.sync(t, live, nil)
	require.NoError(t, res.Error())
	pods, err = e.m.GetPods(e.ctx, false)
	require.NoError(t, err)
	require.NoError(t, e.m.KillPod(e.ctx, live, *pods[0], nil))
	res = e.sync(t, live, nil)
	require.NoError(t, res.Error())
	require.NoError(t, e.m.GarbageCollect(e.ctx, gc, true))
	st := e.status(t, live)
	require.NotNil(t, st.ReadySandbox(), "a pod synced after its kill is not collected")
	require.Len(t, st.SandboxStatuses, 2, "the old sandbox holds the dead instance")
	require.Len(t, st.ContainerStatuses, 2)

	require.NoError(t, e.m.GarbageCollect(e.ctx, runtime.GCPolicy{MaxPerPodContainer: 0, MaxContainers: -1}, true))
	st = e.status(t, live)
	require.Len(t, st.ContainerStatuses, 1, "no dead instance is kept")
	require.Len(t, st.SandboxStatuses, 1, "the emptied old sandbox goes too")
	require.NotNil(t, st.ReadySandbox())
}

// podState is a runtime.PodStateProvider over a set of removable pods.
type podState map[types.UID]bool

func (s podState) ShouldPodContentBeRemoved(uid types.UID) bool { return s[uid] }

func TestGarbageCollectAsksThePodState(t *testing.T) {
	tests := []struct {
		name      string
		kill      bool
		removable bool
		gone      bool
	}{
		{name: "a stopped pod the state keeps stays, with its logs", kill: true, removable: false, gone: false},
		{name: "a stopped pod the state lets go is removed", kill: true, removable: true, gone: true},
		{name: "a running pod stays whatever the state says", kill: false, removable: true, gone: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEnv(t)
			pod := newPod("p", "busybox:1")
			require.NoError(t, e.sync(t, pod, nil).Error())
			if tt.kill {
				pods, err := e.m.GetPods(e.ctx, false)
				require.NoError(t, err)
				require.NoError(t, e.m.KillPod(e.ctx, pod, *pods[0], nil))
			}
			gc := runtime.GCPolicy{MaxPerPodContainer: 1, MaxContainers: -1, PodState: podState{pod.UID: tt.removable}}
			require.NoError(t, e.m.GarbageCollect(e.ctx, gc, true))
			all, err := e.m.GetPods(e.ctx, true)
			require.NoError(t, err)
			if tt.gone {
				require.Empty(t, all)
				require.NoDirExists(t, filepath.Join(e.logs, "test_p_uid-p"))
				return
			}
			require.Len(t, all, 1)
			require.Len(t, all[0].Containers, 1, "the container is kept")
			require.DirExists(t, filepath.Join(e.logs, "test_p_uid-p"))
		})
	}
}
