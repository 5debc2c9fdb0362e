package cri_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
	"github.com/nodekit/nodekit/status"
)

func TestSandboxRecreationPurgesOldInitContainersSoStatusShowsTheNewOne(t *testing.T) {
	e := newFakeEnv(t)
	e.srv.SetBehavior("init", fakecri.Behavior{ExitOnStart: true, Log: "initialized"})
	pod := newPod("purge", "busybox:1", func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox:1", ImagePullPolicy: v1.PullAlways}}
	})
	require.NoError(t, e.sync(t, pod, nil).Error()) // sandbox, init runs and exits 0
	require.NoError(t, e.sync(t, pod, nil).Error()) // main starts
	st := e.status(t, pod)
	require.True(t, running("main")(st), "%v", describe(st))
	oldInit := st.FindContainerStatusByName("init")
	require.NotNil(t, oldInit)
	e.srv.Runtime.Lock()
	oldLog := e.srv.Runtime.Containers[oldInit.ID.ID].LogPath
	e.srv.Runtime.Unlock()
	_, err := os.Stat(oldLog)
	require.NoError(t, err, "the old init container has a log")

	// The sandbox dies; the init container's image cannot be pulled now.
	e.srv.Runtime.Lock()
	e.srv.Runtime.Sandboxes[st.SandboxStatuses[0].ID].State = 1 // SANDBOX_NOTREADY
	e.srv.Runtime.Unlock()
	e.srv.FailNext("PullImage", errorString("registry down"))
	res := e.sync(t, pod, nil)
	require.ErrorIs(t, res.Error(), runtime.ErrImagePull)

	st = e.status(t, pod)
	assert.Nil(t, st.FindContainerStatusByName("init"), "old instance purged: %v", describe(st))
	assert.Empty(t, e.srv.ContainerIDs("init"))
	_, err = os.Stat(oldLog)
	assert.ErrorIs(t, err, os.ErrNotExist, "its log removed")

	reasons := status.NewReasonCache()
	reasons.Update(pod.UID, res)
	api := status.GeneratePodStatus(pod, st, nil, status.GenerateOptions{Reasons: reasons})
	require.Len(t, api.InitContainerStatuses, 1)
	init := api.InitContainerStatuses[0].State
	assert.Nil(t, init.Terminated, "not the old sandbox's exited instance")
	require.NotNil(t, init.Waiting)
	assert.Equal(t, "ErrImagePull", init.Waiting.Reason)
	assert.Equal(t, v1.PodPending, api.Phase)
}
