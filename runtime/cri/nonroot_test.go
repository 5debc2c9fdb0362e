package cri_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/runtime"
)

func TestRunAsNonRootRefusesContainersThatWouldRunAsRoot(t *testing.T) {
	const desc = `(pod: "p_test(uid-p)", container: main)`
	tests := []struct {
		name      string
		podSC     *v1.PodSecurityContext
		sc        *v1.SecurityContext
		imageUID  *int64
		imageUser string
		want      string // the Failed event's message; "" if the container starts
	}{
		{name: "an explicit root user ID is refused", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)},
			imageUID: ptr.To[int64](1234), want: "Error: container's runAsUser breaks non-root policy " + desc},
		{name: "an image without a user runs as root and is refused", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			want: "Error: container has runAsNonRoot and image will run as root " + desc},
		{name: "an image with user 0 is refused", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, imageUID: ptr.To[int64](0),
			want: "Error: container has runAsNonRoot and image will run as root " + desc},
		{name: "an image with a user name cannot be verified and is refused", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, imageUser: "app",
			want: "Error: container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root " + desc},
		{name: "the pod's runAsNonRoot applies to its containers", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			want: "Error: container has runAsNonRoot and image will run as root " + desc},
		{name: "the pod's root user ID is refused", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)},
			imageUID: ptr.To[int64](1234), want: "Error: container's runAsUser breaks non-root policy " + desc},
		{name: "an explicit non-root user ID starts", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)}},
		{name: "an image with a non-root user starts", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, imageUID: ptr.To[int64](1234)},
		{name: "the container's runAsNonRoot false overrides the pod's", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(false)}},
		{name: "a root image starts without runAsNonRoot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &podconfigtest.Recorder{}
			e := newFakeEnv(t, withRecorder(rec))
			e.srv.Images.Lock()
			img := e.srv.Images.Images["busybox:1"]
			if tt.imageUID != nil {
				img.Uid = &runtimeapi.Int64Value{Value: *tt.imageUID}
			}
			img.Username = tt.imageUser
			e.srv.Images.Unlock()
			pod := newPod("p", "busybox:1", func(p *v1.Pod) {
				p.Spec.SecurityContext = tt.podSC
				p.Spec.Containers[0].SecurityContext = tt.sc
			})
			err := e.sync(t, pod, nil).Error()
			if tt.want == "" {
				require.NoError(t, err)
				require.Equal(t, 1, e.srv.Calls("StartContainer"))
				return
			}
			require.ErrorIs(t, err, runtime.ErrCreateContainerConfig)
			require.Equal(t, "CreateContainerConfigError", runtime.Reason(err), "the container waits with this reason")
			require.Zero(t, e.srv.Calls("CreateContainer"), "nothing is created")
			var failed []podconfigtest.Event
			for _, ev := range rec.Events() {
				if ev.Reason == runtime.EventFailed {
					failed = append(failed, ev)
				}
			}
			require.Len(t, failed, 1)
			require.Equal(t, v1.EventTypeWarning, failed[0].Type)
			require.Equal(t, tt.want, failed[0].Message)
			ref, ok := failed[0].Object.(*v1.ObjectReference)
			require.True(t, ok, "the event is on the container's reference")
			require.Equal(t, "Pod", ref.Kind)
			require.Equal(t, pod.UID, ref.UID)
			require.Equal(t, "spec.containers{main}", ref.FieldPath)
		})
	}
}
