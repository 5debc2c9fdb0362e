package cri_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

type podOpt func(*v1.Pod)

func newPod(name string, image string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "test", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			// sleep as PID 1 ignores TERM; keep kills short.
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []v1.Container{{Name: "main", Image: image, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"}}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// logWait bounds waits for containerd to copy a container's output into its
// log file: a process of its own that lags behind on a loaded machine.
const logWait = time.Minute

// realPod is newPod for the shared containerd: its UID is unique to this
// test process, so that the same test run elsewhere at the same time (by
// another checkout) does not find, kill or remove this pod.
func realPod(name string, image string, opts ...podOpt) *v1.Pod {
	p := newPod(name, image, opts...)
	p.UID = types.UID(fmt.Sprintf("uid-%s-%d", name, os.Getpid()))
	return p
}

// logDir is the pod's log directory under the logs root.
func logDir(logs string, pod *v1.Pod) string {
	return filepath.Join(logs, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// syncUntil calls GetPodStatus and SyncPod until done holds for the status,
// as a pod worker would on each PLEG event. It returns the last status.
func syncUntil(t *testing.T, ctx context.Context, m *cri.Manager, pod *v1.Pod, b *runtime.Backoff, rounds int, wait time.Duration, done func(*runtime.PodStatus) bool) *runtime.PodStatus {
	t.Helper()
	for i := 0; i < rounds; i++ {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		require.NoError(t, err)
		if done(st) {
			return st
		}
		_ = m.SyncPod(ctx, pod, st, nil, b)
		if wait > 0 {
			time.Sleep(wait)
		}
	}
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	require.NoError(t, err)
	require.True(t, done(st), "condition not reached after %d syncs: %+v", rounds, describe(st))
	return st
}

func describe(st *runtime.PodStatus) []string {
	var out []string
	for _, sb := range st.SandboxStatuses {
		out = append(out, "sandbox "+sb.ID+" "+string(sb.State))
	}
	for _, c := range st.ContainerStatuses {
		out = append(out, c.Name+" "+string(c.State)+" "+c.Reason)
	}
	return out
}

func running(names ...string) func(*runtime.PodStatus) bool {
	return func(st *runtime.PodStatus) bool {
		for _, n := range names {
			c := st.FindContainerStatusByName(n)
			if c == nil || c.State != runtime.ContainerStateRunning {
				return false
			}
		}
		return true
	}
}

func strconvHex(v uint64) string { return strconv.FormatUint(v, 16) }
