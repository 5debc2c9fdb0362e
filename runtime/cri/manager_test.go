package cri_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

type fakeEnv struct {
	srv   *fakecri.Server
	m     *cri.Manager
	clock *clocktesting.FakeClock
	logs  string
	pods  string
	ctx   context.Context
}

func newFakeEnv(t testing.TB, tweak ...func(*cri.Config)) *fakeEnv {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	srv, err := fakecri.NewServer(fakecri.Config{Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	srv.Images.SetFakeImages([]string{"busybox:1"})
	logs, pods := t.TempDir(), t.TempDir()
	cfg := cri.Config{Endpoint: srv.Endpoint(), PodLogsRoot: logs, PodsRoot: pods, Clock: clk}
	for _, f := range tweak {
		f(&cfg)
	}
	m, err := cri.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	srv.ResetCalls()
	return &fakeEnv{srv: srv, m: m, clock: clk, logs: logs, pods: pods, ctx: context.Background()}
}

func (e *fakeEnv) status(t testing.TB, pod *v1.Pod) *runtime.PodStatus {
	t.Helper()
	st, err := e.m.GetPodStatus(e.ctx, pod.UID, pod.Name, pod.Namespace)
	require.NoError(t, err)
	return st
}

func (e *fakeEnv) sync(t *testing.T, pod *v1.Pod, b *runtime.Backoff) runtime.PodSyncResult {
	t.Helper()
	return e.m.SyncPod(e.ctx, pod, e.status(t, pod), nil, b)
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  cri.Config
		want error
	}{
		{"missing endpoint", cri.Config{}, runtime.ErrInvalidConfig},
		{"tcp endpoint", cri.Config{Endpoint: "tcp://127.0.0.1:1"}, runtime.ErrInvalidConfig},
		{"bad image endpoint", cri.Config{Endpoint: "unix:///x.sock", ImageEndpoint: "x"}, runtime.ErrInvalidConfig},
		{"negative timeout", cri.Config{Endpoint: "unix:///x.sock", CallTimeout: -1}, runtime.ErrInvalidConfig},
		{"runtime down", cri.Config{Endpoint: filepath.Join(t.TempDir(), "none.sock"), CallTimeout: time.Second}, cri.ErrRuntimeUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := cri.New(context.Background(), tt.cfg)
			require.Nil(t, m)
			require.ErrorIs(t, err, tt.want)
		})
	}
}

func TestNewChecksTheAPI(t *testing.T) {
	srv, err := fakecri.NewServer(fakecri.Config{})
	require.NoError(t, err)
	defer srv.Close()
	srv.FailNext("Version", status.Error(codes.Unimplemented, "v1 unknown"))
	_, err = cri.New(context.Background(), cri.Config{Endpoint: srv.Endpoint()})
	require.ErrorIs(t, err, runtime.ErrNotSupported, "a runtime without runtime/v1")

	m, err := cri.New(context.Background(), cri.Config{Endpoint: srv.Endpoint()})
	require.NoError(t, err, "the runtime is back: a retry works")
	defer m.Close()
	require.Equal(t, "fakecri", m.Type())
	v, err := m.Version(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, v)
}

func TestStatus(t *testing.T) {
	e := newFakeEnv(t)
	st, err := e.m.Status(e.ctx)
	require.NoError(t, err)
	require.True(t, st.Ready())

	e.srv.FailNext("Status", status.Error(codes.Unimplemented, "no"))
	_, err = e.m.Status(e.ctx)
	require.ErrorIs(t, err, runtime.ErrNotSupported, "Unimplemented is not supported, not a failure")

	e.srv.FailNext("Status", errors.New("boom"))
	_, err = e.m.Status(e.ctx)
	require.Error(t, err)
	require.NotErrorIs(t, err, runtime.ErrNotSupported)
}

func TestCallsTimeOut(t *testing.T) {
	// CallTimeout also bounds New's handshake, which includes connecting:
	// a few milliseconds fail it on a loaded machine.
	e := newFakeEnv(t, func(c *cri.Config) { c.CallTimeout = time.Second })
	e.srv.SetLatency("ListPodSandbox", time.Minute)
	_, err := e.m.GetPods(e.ctx, true)
	require.Error(t, err)
	require.Equal(t, codes.DeadlineExceeded, status.Code(errors.Unwrap(err)))
}

// A pod on the pod network asks for its new sandbox's IPs once (for its
// containers' hosts file), as the kubelet's SyncPod does; one on the host's
// network does not.
func TestPodStartCalls(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("one", "busybox:1")
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "second", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent})
	st := &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	res := e.m.SyncPod(e.ctx, pod, st, nil, nil)
	require.NoError(t, res.Error())
	require.Equal(t, map[string]int{"RunPodSandbox": 1, "PodSandboxStatus": 1, "ImageStatus": 2, "CreateContainer": 2, "StartContainer": 2}, e.srv.CallCounts())

	e.srv.ResetCalls()
	pod = newPod("host", "busybox:1", func(p *v1.Pod) { p.Spec.HostNetwork = true })
	st = &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	require.NoError(t, e.m.SyncPod(e.ctx, pod, st, nil, nil).Error())
	require.Equal(t, map[string]int{"RunPodSandbox": 1, "ImageStatus": 1, "CreateContainer": 1, "StartContainer": 1}, e.srv.CallCounts())
}

func TestWireConventions(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("web", "busybox:1", func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "web"}
		p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
		p.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
		p.Spec.Containers[0].TerminationMessagePolicy = v1.TerminationMessageReadFile
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}}
	})
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())

	sbID := "web_test_uid-web_0"
	e.srv.Runtime.Lock()
	sb := e.srv.Runtime.Sandboxes[sbID]
	require.NotNil(t, sb)
	require.Equal(t, map[string]string{
		"app": "web", cri.LabelPodName: "web", cri.LabelPodNamespace: "test", cri.LabelPodUID: "uid-web",
	}, sb.Labels)
	require.Equal(t, "file", sb.Annotations["kubernetes.io/config.source"])
	c := e.srv.Runtime.Containers[sbID+"_main_0"]
	require.NotNil(t, c)
	require.Equal(t, map[string]string{
		cri.LabelPodName: "web", cri.LabelPodNamespace: "test", cri.LabelPodUID: "uid-web", cri.LabelContainerName: "main",
	}, c.Labels)
	wantHash := runtime.HashContainer(&pod.Spec.Containers[0])
	require.Equal(t, map[string]string{
		cri.AnnotationContainerHash:            strconvHex(wantHash),
		cri.AnnotationRestartCount:             "0",
		cri.AnnotationTerminationMessagePath:   "/dev/termination-log",
		cri.AnnotationTerminationMessagePolicy: "File",
		cri.AnnotationContainerType:            "container",
		cri.AnnotationPodTerminationGrace:      "1",
		cri.AnnotationContainerPorts:           `[{"containerPort":80,"protocol":"TCP"}]`,
	}, c.Annotations)
	require.Equal(t, filepath.Join(e.logs, "test_web_uid-web", "main", "0.log"), c.LogPath)
	e.srv.Runtime.Unlock()
	require.DirExists(t, filepath.Join(e.logs, "test_web_uid-web"), "the pod log directory is made before the sandbox")

	st := e.status(t, pod)
	cs := st.FindContainerStatusByName("main")
	require.NotNil(t, cs)
	require.Equal(t, wantHash, cs.Hash, "the hash is read back")
	require.Equal(t, "fakecri://"+sbID+"_main_0", cs.ID.String())
	require.Equal(t, runtime.ContainerStateRunning, cs.State)
	require.Equal(t, t0, cs.CreatedAt.UTC())
	require.Len(t, st.SandboxStatuses, 1)
	require.Equal(t, runtime.SandboxStateReady, st.SandboxStatuses[0].State)
	require.Equal(t, []string{"192.168.192.168"}, st.IPs)
}

func TestPrivilegedContainers(t *testing.T) {
	privileged := func(p *v1.Pod) {
		p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	}
	t.Run("privileged pod is refused when denied and nothing starts", func(t *testing.T) {
		e := newFakeEnv(t, func(c *cri.Config) { c.DenyPrivileged = true })
		res := e.sync(t, newPod("priv", "busybox:1", privileged), nil)
		require.ErrorIs(t, res.Error(), runtime.ErrCreateContainerConfig)
		require.Contains(t, res.Error().Error(), "DenyPrivileged")
		require.Zero(t, e.srv.Calls("RunPodSandbox"))
		require.Zero(t, e.srv.Calls("CreateContainer"))
	})
	t.Run("privileged pod runs by default, as with the kubelet", func(t *testing.T) {
		e := newFakeEnv(t)
		res := e.sync(t, newPod("priv", "busybox:1", privileged), nil)
		require.NoError(t, res.Error())
		require.Equal(t, 1, e.srv.Calls("StartContainer"))
	})
}
