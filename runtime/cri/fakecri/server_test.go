package fakecri_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	srv *fakecri.Server
	rt  runtimeapi.RuntimeServiceClient
	img runtimeapi.ImageServiceClient
	ctx context.Context
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func start(t *testing.T) *env {
	t.Helper()
	srv, err := fakecri.NewServer(fakecri.Config{Clock: clocktesting.NewFakePassiveClock(t0)})
	require.NoError(t, err)
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close()
		require.NoError(t, srv.Close())
	})
	return &env{srv: srv, rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn), ctx: context.Background()}
}

func (e *env) sandbox(t *testing.T, name string, attempt uint32) string {
	t.Helper()
	resp, err := e.rt.RunPodSandbox(e.ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: "uid-" + name, Attempt: attempt},
		LogDirectory: t.TempDir(),
	}})
	require.NoError(t, err)
	return resp.PodSandboxId
}

func (e *env) container(sb, name string, attempt uint32) (string, error) {
	resp, err := e.rt.CreateContainer(e.ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
			Image:    &runtimeapi.ImageSpec{Image: "busybox"},
			LogPath:  name + "/0.log",
		},
	})
	return resp.GetContainerId(), err
}

func (e *env) status(t *testing.T, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := e.rt.ContainerStatus(e.ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	require.NoError(t, err)
	return resp.Status
}

func TestNamesAreReserved(t *testing.T) {
	e := start(t)
	sb := e.sandbox(t, "p", 0)
	_, err := e.rt.RunPodSandbox(e.ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "uid-p"},
	}})
	require.Equal(t, codes.AlreadyExists, status.Code(err), "same sandbox attempt twice")
	_, err = e.container(sb, "c", 0)
	require.NoError(t, err)
	_, err = e.container(sb, "c", 0)
	require.Equal(t, codes.AlreadyExists, status.Code(err), "same container attempt twice")
	_, err = e.container(sb, "c", 1)
	require.NoError(t, err, "next attempt is a new name")
}

func TestContainerLifecycle(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, e *env, sb string)
	}{
		{"container in a missing sandbox is not created", func(t *testing.T, e *env, _ string) {
			_, err := e.container("nope", "c", 0)
			require.Equal(t, codes.NotFound, status.Code(err))
		}},
		{"container in a stopped sandbox is not created", func(t *testing.T, e *env, sb string) {
			_, err := e.rt.StopPodSandbox(e.ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
			require.NoError(t, err)
			_, err = e.container(sb, "c", 0)
			require.Equal(t, codes.FailedPrecondition, status.Code(err))
		}},
		{"container exits on command with its code", func(t *testing.T, e *env, sb string) {
			id, err := e.container(sb, "c", 0)
			require.NoError(t, err)
			require.Error(t, e.srv.Exit(id, 3), "a created container cannot exit")
			_, err = e.rt.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
			require.NoError(t, err)
			require.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, e.status(t, id).State)
			require.NoError(t, e.srv.Exit(id, 3))
			st := e.status(t, id)
			require.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
			require.EqualValues(t, 3, st.ExitCode)
			require.Equal(t, "Error", st.Reason)
			require.Equal(t, t0.UnixNano(), st.FinishedAt)
		}},
		{"container started twice fails", func(t *testing.T, e *env, sb string) {
			id, err := e.container(sb, "c", 0)
			require.NoError(t, err)
			_, err = e.rt.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
			require.NoError(t, err)
			_, err = e.rt.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
			require.Equal(t, codes.FailedPrecondition, status.Code(err))
		}},
		{"crashing container exits on start and writes its log", func(t *testing.T, e *env, sb string) {
			e.srv.SetBehavior("crash", fakecri.Behavior{ExitOnStart: true, ExitCode: 1, Log: "boom\nbang"})
			id, err := e.container(sb, "crash", 0)
			require.NoError(t, err)
			_, err = e.rt.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
			require.NoError(t, err)
			st := e.status(t, id)
			require.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
			require.EqualValues(t, 1, st.ExitCode)
			b, err := os.ReadFile(st.LogPath)
			require.NoError(t, err)
			require.Equal(t, "2026-01-02T03:04:05Z stdout F boom\n2026-01-02T03:04:05Z stdout F bang\n", string(b))
		}},
		{"stop records the timeout", func(t *testing.T, e *env, sb string) {
			id, err := e.container(sb, "c", 0)
			require.NoError(t, err)
			_, err = e.rt.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
			require.NoError(t, err)
			_, err = e.rt.StopContainer(e.ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 7})
			require.NoError(t, err)
			got, ok := e.srv.StopTimeout(id)
			require.True(t, ok)
			require.EqualValues(t, 7, got)
			require.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, e.status(t, id).State)
		}},
		{"running container is not removed", func(t *testing.T, e *env, sb string) {
			id, err := e.container(sb, "c", 0)
			require.NoError(t, err)
			_, err = e.rt.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
			require.NoError(t, err)
			_, err = e.rt.RemoveContainer(e.ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
			require.Equal(t, codes.FailedPrecondition, status.Code(err))
		}},
		{"stopping the sandbox kills its containers", func(t *testing.T, e *env, sb string) {
			id, err := e.container(sb, "c", 0)
			require.NoError(t, err)
			_, err = e.rt.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
			require.NoError(t, err)
			_, err = e.rt.StopPodSandbox(e.ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
			require.NoError(t, err)
			st := e.status(t, id)
			require.Equal(t, runtimeapi.ContainerState_CONTAINER_EXITED, st.State)
			require.EqualValues(t, 137, st.ExitCode)
		}},
		{"removing the sandbox removes its containers", func(t *testing.T, e *env, sb string) {
			id, err := e.container(sb, "c", 0)
			require.NoError(t, err)
			_, err = e.rt.RemovePodSandbox(e.ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
			require.NoError(t, err)
			_, err = e.rt.ContainerStatus(e.ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
			require.Equal(t, codes.NotFound, status.Code(err))
			_, err = e.rt.PodSandboxStatus(e.ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
			require.Equal(t, codes.NotFound, status.Code(err))
			_, err = e.rt.RemovePodSandbox(e.ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
			require.NoError(t, err, "remove is idempotent")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t)
			tt.run(t, e, e.sandbox(t, "p", 0))
		})
	}
}

func TestInjection(t *testing.T) {
	e := start(t)
	boom := errors.New("boom")
	e.srv.FailNext("Version", boom)
	e.srv.FailNext("Version", status.Error(codes.Unimplemented, "no"))
	_, err := e.rt.Version(e.ctx, &runtimeapi.VersionRequest{})
	require.Equal(t, codes.Unknown, status.Code(err))
	require.True(t, strings.Contains(err.Error(), "boom"))
	_, err = e.rt.Version(e.ctx, &runtimeapi.VersionRequest{})
	require.Equal(t, codes.Unimplemented, status.Code(err), "gRPC status errors keep their code")
	_, err = e.rt.Version(e.ctx, &runtimeapi.VersionRequest{})
	require.NoError(t, err, "FailNext fails only the queued calls")

	e.srv.SetError("ListImages", status.Error(codes.Unavailable, "down"))
	for range 2 {
		_, err = e.img.ListImages(e.ctx, &runtimeapi.ListImagesRequest{})
		require.Equal(t, codes.Unavailable, status.Code(err), "SetError persists")
	}
	e.srv.SetError("ListImages", nil)
	_, err = e.img.ListImages(e.ctx, &runtimeapi.ListImagesRequest{})
	require.NoError(t, err)

	// Give up only once the call reached the server: a short deadline alone
	// could expire on a loaded machine before the server counted it.
	e.srv.SetLatency("Status", time.Hour)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := e.rt.Status(ctx, &runtimeapi.StatusRequest{})
		errc <- err
	}()
	require.Eventually(t, func() bool { return e.srv.Calls("Status") == 1 }, 30*time.Second, time.Millisecond)
	cancel()
	require.Equal(t, codes.Canceled, status.Code(<-errc), "a call held by latency ends when the caller gives up")

	require.Equal(t, 3, e.srv.Calls("Version"))
	require.Equal(t, 3, e.srv.Calls("ListImages"))
	require.Equal(t, 1, e.srv.Calls("Status"))
	require.Equal(t, 7, e.srv.TotalCalls())
	e.srv.ResetCalls()
	require.Empty(t, e.srv.CallCounts())
}

func TestImages(t *testing.T) {
	e := start(t)
	resp, err := e.img.ImageStatus(e.ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	require.NoError(t, err)
	require.Nil(t, resp.Image, "unknown image has no status")
	_, err = e.img.PullImage(e.ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	require.NoError(t, err)
	resp, err = e.img.ImageStatus(e.ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
	require.NoError(t, err)
	require.Equal(t, "busybox", resp.Image.GetId())
}
