package cri_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// realManager connects to the containerd of hack/containerd.sh.
func realManager(t *testing.T) (*cri.Manager, string, string) {
	t.Helper()
	endpoint := testenv.CRIEndpoint(t)
	image := testenv.TestImage(t)
	logs := t.TempDir()
	m, err := cri.New(context.Background(), cri.Config{Endpoint: endpoint, PodLogsRoot: logs, PodsRoot: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m, image, logs
}

// cleanup kills and removes the pod, and checks nothing of it is left.
func cleanup(t *testing.T, m *cri.Manager, pod *v1.Pod) {
	t.Cleanup(func() {
		ctx := context.Background()
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		require.NoError(t, err)
		require.NoError(t, m.KillPod(ctx, pod, podOf(st), nil))
		require.NoError(t, m.RemovePod(ctx, pod.UID))
		pods, err := m.GetPods(ctx, true)
		require.NoError(t, err)
		for _, p := range pods {
			require.NotEqual(t, pod.UID, p.ID, "pod left behind")
		}
	})
}

func podOf(st *runtime.PodStatus) runtime.Pod {
	p := runtime.Pod{ID: st.ID, Name: st.Name, Namespace: st.Namespace}
	for _, c := range st.ContainerStatuses {
		if c.State == runtime.ContainerStateRunning {
			p.Containers = append(p.Containers, &runtime.Container{ID: c.ID, Name: c.Name, State: c.State})
		}
	}
	for _, s := range st.SandboxStatuses {
		p.Sandboxes = append(p.Sandboxes, &runtime.Container{ID: runtime.ContainerID{ID: s.ID}})
	}
	return p
}

func TestRealInitAndTwoContainersRun(t *testing.T) {
	m, image, logs := realManager(t)
	ctx := context.Background()
	pod := realPod("init-two", image, func(p *v1.Pod) {
		cache := []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
		p.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.InitContainers = []v1.Container{{Name: "init", Image: image, ImagePullPolicy: v1.PullIfNotPresent, VolumeMounts: cache,
			Command: []string{"sh", "-c", "echo init done; echo from-init > /cache/note"}}}
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "second", Image: image, ImagePullPolicy: v1.PullIfNotPresent, VolumeMounts: cache,
			Command: []string{"sh", "-c", "echo hello $(GREETING) $(cat /cache/note); exec sleep 3600"}, Env: []v1.EnvVar{{Name: "GREETING", Value: "world"}}})
	})
	cleanup(t, m, pod)
	st := syncUntil(t, ctx, m, pod, nil, 50, 100*time.Millisecond, running("main", "second"))
	init := st.FindContainerStatusByName("init")
	require.NotNil(t, init)
	require.Equal(t, runtime.ContainerStateExited, init.State)
	require.Equal(t, 0, init.ExitCode)
	require.Len(t, st.IPs, 1, "pod network gives the pod an IP")

	dir := logDir(logs, pod)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "second", "0.log"))
		return err == nil && strings.Contains(string(b), "stdout F hello world from-init")
	}, logWait, 50*time.Millisecond)
	b, err := os.ReadFile(filepath.Join(dir, "init", "0.log"))
	require.NoError(t, err)
	require.Contains(t, string(b), "stdout F init done")
}

func TestRealExitCodesAndLogs(t *testing.T) {
	m, image, logs := realManager(t)
	ctx := context.Background()
	pod := realPod("exits", image, func(p *v1.Pod) {
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		p.Spec.Containers = []v1.Container{
			{Name: "ok", Image: image, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", "echo out; echo err >&2; exit 0"}},
			{Name: "fail", Image: image, ImagePullPolicy: v1.PullIfNotPresent, TerminationMessagePath: "/dev/termination-log",
				Command: []string{"sh", "-c", "echo failing; echo last words > /dev/termination-log; exit 3"}},
		}
	})
	cleanup(t, m, pod)
	exited := func(st *runtime.PodStatus) bool {
		for _, n := range []string{"ok", "fail"} {
			if c := st.FindContainerStatusByName(n); c == nil || c.State != runtime.ContainerStateExited {
				return false
			}
		}
		return true
	}
	st := syncUntil(t, ctx, m, pod, nil, 50, 100*time.Millisecond, exited)
	ok, fail := st.FindContainerStatusByName("ok"), st.FindContainerStatusByName("fail")
	require.Equal(t, 0, ok.ExitCode)
	require.Equal(t, "Completed", ok.Reason)
	require.Equal(t, 3, fail.ExitCode)
	require.Equal(t, "Error", fail.Reason)
	require.Equal(t, "last words\n", fail.Message, "the termination message")
	// containerd may stamp a quick exit a hair before the start it records.
	require.False(t, fail.StartedAt.IsZero())
	require.False(t, fail.FinishedAt.IsZero())

	dir := logDir(logs, pod)
	b, err := os.ReadFile(filepath.Join(dir, "ok", "0.log"))
	require.NoError(t, err)
	require.Regexp(t, `(?m)^\S+ stdout F out$`, string(b))
	require.Regexp(t, `(?m)^\S+ stderr F err$`, string(b))
	b, err = os.ReadFile(filepath.Join(dir, "fail", "0.log"))
	require.NoError(t, err)
	require.Regexp(t, `(?m)^\S+ stdout F failing$`, string(b))
}

func TestRealCrashLoopBacksOff(t *testing.T) {
	m, image, logs := realManager(t)
	ctx := context.Background()
	pod := realPod("crashloop", image, func(p *v1.Pod) {
		p.Spec.Containers[0].Command = []string{"sh", "-c", "echo crash; exit 1"}
	})
	cleanup(t, m, pod)
	// Short delays keep the test quick; the mechanism is the default's.
	b := runtime.NewBackoff(300*time.Millisecond, 10*time.Second, 0, nil)
	key := runtime.BackoffKey(pod, &pod.Spec.Containers[0])
	var delays []time.Duration
	st := syncUntil(t, ctx, m, pod, b, 400, 25*time.Millisecond, func(st *runtime.PodStatus) bool {
		if d := b.Get(key); d > 0 && (len(delays) == 0 || delays[len(delays)-1] != d) {
			delays = append(delays, d)
		}
		c := st.FindContainerStatusByName("main")
		return c != nil && c.RestartCount >= 3 && c.State == runtime.ContainerStateExited
	})
	// A sync right after the exit is refused.
	res := m.SyncPod(ctx, pod, st, nil, b)
	require.True(t, errors.Is(res.Error(), runtime.ErrCrashLoopBackOff), "a sync right after a crash backs off: %v", res.Error())
	require.Equal(t, []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 1200 * time.Millisecond}, delays, "the delay doubles")
	var counts []int
	for _, c := range st.ContainerStatuses {
		counts = append(counts, c.RestartCount)
		require.Equal(t, 1, c.ExitCode)
	}
	require.Equal(t, []int{3, 2, 1, 0}, counts, "every instance is kept, newest first")
	for i := range 4 {
		_, err := os.Stat(filepath.Join(logDir(logs, pod), "main", strconv.Itoa(i)+".log"))
		require.NoError(t, err, "a log per restart")
	}
	// No GarbageCollect here: it is node-wide, and other packages' tests may
	// share this containerd. The fake tests cover it.
}

func TestRealKillPodHonoursGracePeriod(t *testing.T) {
	m, image, logs := realManager(t)
	ctx := context.Background()
	pod := realPod("grace", image, func(p *v1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](2)
		p.Spec.Containers = []v1.Container{
			// Exits on TERM after saying so.
			{Name: "polite", Image: image, ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sh", "-c", "trap 'echo got TERM; exit 0' TERM; while true; do sleep 0.1; done"}},
			// PID 1 without a handler ignores TERM: killed when the grace period ends.
			{Name: "stubborn", Image: image, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"}},
		}
	})
	cleanup(t, m, pod)
	st := syncUntil(t, ctx, m, pod, nil, 50, 100*time.Millisecond, running("polite", "stubborn"))
	started := time.Now()
	require.NoError(t, m.KillPod(ctx, pod, podOf(st), nil))

	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	require.NoError(t, err)
	polite, stubborn := st.FindContainerStatusByName("polite"), st.FindContainerStatusByName("stubborn")
	require.Equal(t, runtime.ContainerStateExited, polite.State)
	require.Equal(t, 0, polite.ExitCode, "the polite container exits on TERM")
	require.Equal(t, runtime.ContainerStateExited, stubborn.State)
	require.Equal(t, 137, stubborn.ExitCode, "the stubborn one is killed")
	require.GreaterOrEqual(t, stubborn.FinishedAt.Sub(started), 1900*time.Millisecond, "but not before its grace period")
	require.Nil(t, st.ReadySandbox())
	b, err := os.ReadFile(filepath.Join(logDir(logs, pod), "polite", "0.log"))
	require.NoError(t, err)
	require.Contains(t, string(b), "got TERM")
}

func TestRealNetworkModes(t *testing.T) {
	m, image, logs := realManager(t)
	ctx := context.Background()
	host, err := os.Hostname()
	require.NoError(t, err)
	for _, hostNetwork := range []bool{false, true} {
		name := map[bool]string{false: "podnet", true: "hostnet"}[hostNetwork]
		t.Run(name, func(t *testing.T) {
			pod := realPod(name, image, func(p *v1.Pod) {
				p.Spec.HostNetwork = hostNetwork
				p.Spec.Containers[0].Command = []string{"sh", "-c", "echo host=$(hostname); exec sleep 3600"}
			})
			cleanup(t, m, pod)
			st := syncUntil(t, ctx, m, pod, nil, 50, 100*time.Millisecond, running("main"))
			require.Equal(t, hostNetwork, st.SandboxStatuses[0].HostNetwork)
			want := "host=" + name
			if hostNetwork {
				require.Empty(t, st.IPs, "a host-network pod has no pod IP")
				want = "host=" + host
			} else {
				require.Len(t, st.IPs, 1)
				require.NotEqual(t, "127.0.0.1", st.IPs[0])
			}
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(filepath.Join(logDir(logs, pod), "main", "0.log"))
				return err == nil && strings.Contains(string(b), want)
			}, logWait, 50*time.Millisecond)
		})
	}
}

func TestRealRuntimeStatusAndEvents(t *testing.T) {
	m, _, _ := realManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.Equal(t, "containerd", m.Type())
	v, err := m.Version(ctx)
	require.NoError(t, err)
	st, err := m.Status(ctx)
	require.NoError(t, err)
	require.True(t, st.Ready(), "%+v", st.Conditions)
	events, err := m.WatchContainerEvents(ctx)
	if strings.HasPrefix(v, "1.6") {
		require.ErrorIs(t, err, runtime.ErrNotSupported, "containerd 1.6 has no GetContainerEvents")
		return
	}
	if err == nil {
		cancel()
		for range events {
		}
	}
}
