package cri_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
)

// The kubelet's `kubectl logs` path on containerd: the container's CRI log
// file, tailed and followed until the container exits. The sleeps order the
// lines: stdout and stderr are separate pipes to containerd.
func TestRealContainerLogs(t *testing.T) {
	m, image, _ := realManager(t)
	ctx := context.Background()
	pod := newPod("logs-"+time.Now().Format("150405.000000"), image, func(p *v1.Pod) {
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		p.Spec.Containers[0].Command = []string{"sh", "-c", "echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three; sleep 2; echo four"}
	})
	cleanup(t, m, pod)
	st := syncUntil(t, ctx, m, pod, nil, 50, 100*time.Millisecond, func(st *runtime.PodStatus) bool {
		c := st.FindContainerStatusByName("main")
		return c != nil && c.State == runtime.ContainerStateRunning
	})
	id := st.FindContainerStatusByName("main").ID

	// follow from the start: every line, ending when the container exits
	var followed testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- m.GetContainerLogs(ctx, pod, id, &v1.PodLogOptions{Follow: true}, &followed, &followed)
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("following did not end with the container")
	}
	assert.Equal(t, "one\ntwo\nthree\nfour\n", followed.String())

	var out, errs bytes.Buffer
	require.NoError(t, m.GetContainerLogs(ctx, pod, id, &v1.PodLogOptions{TailLines: ptr.To[int64](2)}, &out, &errs))
	assert.Equal(t, "three\nfour\n", out.String())

	out.Reset()
	errs.Reset()
	require.NoError(t, m.GetContainerLogs(ctx, pod, id, &v1.PodLogOptions{}, &out, &errs))
	assert.Equal(t, "one\nthree\nfour\n", out.String())
	assert.Equal(t, "two\n", errs.String(), "stderr lines go to the stderr writer")

	err := m.GetContainerLogs(ctx, pod, runtime.ContainerID{Type: id.Type, ID: "no-such-container"}, &v1.PodLogOptions{}, &out, &errs)
	assert.ErrorIs(t, err, runtime.ErrNotFound)
}
