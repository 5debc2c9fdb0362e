package provider_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/provider/providertest"
	"github.com/nodekit/nodekit/runtime"
)

// streamsEnv runs pod on a Streams provider and returns the runtime and
// the ID of the pod's container "app", as the server finds it.
func streamsEnv(t *testing.T, p provider.PodLifecycleHandler, pod *v1.Pod) (*provider.Runtime, runtime.ContainerID) {
	t.Helper()
	rt, err := provider.New(provider.Config{Provider: p})
	require.NoError(t, err)
	b := runtime.NewBackoff(time.Second, time.Second, 0, nil)
	require.NoError(t, rt.SyncPod(context.Background(), pod, nil, nil, b).Error())
	pods, err := rt.GetPods(context.Background(), false)
	require.NoError(t, err)
	require.Len(t, pods, 1)
	require.Len(t, pods[0].Containers, 1)
	return rt, pods[0].Containers[0].ID
}

func TestKubeletAPIIsOnlyWhatTheProviderHas(t *testing.T) {
	plain, err := provider.New(provider.Config{Provider: providertest.New(nil)})
	require.NoError(t, err)
	logs, streaming, pf := plain.KubeletAPI()
	assert.Nil(t, logs, "no ContainerLogs: the server does not serve /containerLogs")
	assert.Nil(t, streaming, "no exec or attach: no /exec, /attach")
	assert.Nil(t, pf, "no PortForward: no /portForward")

	pod := testPod("web")
	ctx := context.Background()
	assert.ErrorIs(t, plain.GetContainerLogs(ctx, pod, runtime.ContainerID{}, nil, io.Discard, io.Discard), runtime.ErrNotSupported)
	assert.ErrorIs(t, plain.Exec(ctx, pod, runtime.ContainerID{}, []string{"true"}, runtime.AttachIO{}), runtime.ErrNotSupported)
	assert.ErrorIs(t, plain.Attach(ctx, pod, runtime.ContainerID{}, runtime.AttachIO{}), runtime.ErrNotSupported)
	assert.ErrorIs(t, plain.PortForward(ctx, pod, 80, nil), runtime.ErrNotSupported)

	withAll, err := provider.New(provider.Config{Provider: providertest.NewStreams()})
	require.NoError(t, err)
	logs, streaming, pf = withAll.KubeletAPI()
	assert.Equal(t, withAll, logs)
	assert.Equal(t, withAll, streaming)
	assert.Equal(t, withAll, pf)
}

func TestLogsPassTheOptionsOn(t *testing.T) {
	p := providertest.NewStreams()
	pod := testPod("web")
	rt, id := streamsEnv(t, p, pod)
	p.SetLogs("default", "web", "app", "one\ntwo\nthree\n")

	since := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := &v1.PodLogOptions{TailLines: ptr.To[int64](2), LimitBytes: ptr.To[int64](6), Timestamps: true,
		Follow: true, Previous: true, SinceTime: &since}
	var out bytes.Buffer
	require.NoError(t, rt.GetContainerLogs(context.Background(), pod, id, opts, &out, io.Discard))
	assert.Equal(t, "two\nth", out.String(), "the provider's logs, as it cut them")
	assert.Equal(t, []v1.PodLogOptions{*opts}, p.LogOptions(), "every option reaches the provider")

	opts = &v1.PodLogOptions{SinceSeconds: ptr.To[int64](30)}
	out.Reset()
	require.NoError(t, rt.GetContainerLogs(context.Background(), pod, id, opts, &out, io.Discard))
	assert.Equal(t, "one\ntwo\nthree\n", out.String())
	assert.Equal(t, *opts, p.LogOptions()[1])
}

func TestContainersAreFoundByTheProvidersIDs(t *testing.T) {
	p := providertest.NewStreams()
	pod := testPod("web")
	_, made := streamsEnv(t, p, pod)
	assert.Equal(t, "provider://uid-web-app-0", made.String(), "without an ID from the provider, one is made up")
	p.SetLogs("default", "web", "app", "hello\n")

	// A provider that reports IDs, found by a runtime that starts now.
	require.True(t, p.SetPodStatus("default", "web", func(st *v1.PodStatus) {
		st.ContainerStatuses[0].ContainerID = "vk://current"
		st.ContainerStatuses[0].LastTerminationState.Terminated = &v1.ContainerStateTerminated{ContainerID: "vk://previous"}
	}))
	rt, err := provider.New(provider.Config{Provider: p})
	require.NoError(t, err)
	pods, err := rt.GetPods(context.Background(), false)
	require.NoError(t, err)
	require.Len(t, pods, 1)
	require.Len(t, pods[0].Containers, 1)
	assert.Equal(t, "vk://current", pods[0].Containers[0].ID.String())

	for _, id := range []string{"vk://current", "vk://previous", "provider://uid-web-app-3"} {
		var out bytes.Buffer
		cid, err := runtime.ParseContainerID(id)
		require.NoError(t, err)
		require.NoError(t, rt.GetContainerLogs(context.Background(), pod, cid, nil, &out, io.Discard), id)
		assert.Equal(t, "hello\n", out.String(), id)
	}
	err = rt.GetContainerLogs(context.Background(), pod, runtime.ContainerID{Type: "vk", ID: "other"}, nil, io.Discard, io.Discard)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "a container the pod does not have")
}

func TestExecPassesTheExitCodeThrough(t *testing.T) {
	p := providertest.NewStreams()
	pod := testPod("web")
	rt, id := streamsEnv(t, p, pod)
	ctx := context.Background()

	var out bytes.Buffer
	require.NoError(t, rt.Exec(ctx, pod, id, []string{"echo", "hi", "there"}, runtime.AttachIO{Stdout: &out}))
	assert.Equal(t, "hi there\n", out.String())

	err := rt.Exec(ctx, pod, id, []string{"exit", "3"}, runtime.AttachIO{Stdout: io.Discard})
	var exit interface{ ExitStatus() int }
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 3, exit.ExitStatus())

	other := testPod("gone")
	err = rt.Exec(ctx, other, runtime.ContainerID{Type: "provider", ID: "uid-gone-app-0"}, []string{"echo"}, runtime.AttachIO{})
	assert.ErrorIs(t, err, runtime.ErrNotFound, "the provider's NotFound")
}

func TestAttachGetsStreamsAndResizes(t *testing.T) {
	p := providertest.NewStreams()
	pod := testPod("web")
	rt, id := streamsEnv(t, p, pod)

	var out bytes.Buffer
	require.NoError(t, rt.Attach(context.Background(), pod, id, runtime.AttachIO{Stdin: strings.NewReader("typed\n"), Stdout: &out}))
	assert.Equal(t, "attached app\ntyped\n", out.String())

	resize := make(chan runtime.TermSize, 1)
	resize <- runtime.TermSize{Width: 80, Height: 24}
	close(resize)
	out.Reset()
	require.NoError(t, rt.Attach(context.Background(), pod, id, runtime.AttachIO{Stdout: &out, TTY: true, Resize: resize}))
	assert.Equal(t, "attached app\nsize 80x24\n", out.String())
}

func TestPortForwardReachesTheProvider(t *testing.T) {
	p := providertest.NewStreams()
	pod := testPod("web")
	rt, _ := streamsEnv(t, p, pod)

	client, server := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- rt.PortForward(context.Background(), pod, 8080, server) }()
	req, _ := http.NewRequest(http.MethodGet, "http://pod/", nil)
	require.NoError(t, req.Write(client))
	resp, err := http.ReadResponse(bufio.NewReader(client), req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "default/web:8080", string(body))
	client.Close()
	require.NoError(t, <-done)
}

// blockingLogs follows logs that never end by themselves.
type blockingLogs struct {
	*providertest.Provider
	r      *io.PipeReader
	closed chan struct{}
}

func (b *blockingLogs) ContainerLogs(context.Context, string, string, string, *v1.PodLogOptions) (io.ReadCloser, error) {
	return closeNotifier{b.r, b.closed}, nil
}

type closeNotifier struct {
	*io.PipeReader
	closed chan struct{}
}

func (c closeNotifier) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return c.PipeReader.Close()
}

func TestFollowedLogsEndWithTheRequest(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	p := &blockingLogs{Provider: providertest.New(nil), r: r, closed: make(chan struct{})}
	pod := testPod("web")
	rt, id := streamsEnv(t, p, pod)

	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer // read once GetContainerLogs returned
	done := make(chan error, 1)
	go func() {
		done <- rt.GetContainerLogs(ctx, pod, id, &v1.PodLogOptions{Follow: true}, &out, io.Discard)
	}()
	_, err := w.Write([]byte("line\n"))
	require.NoError(t, err)
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("GetContainerLogs still following after its context ended")
	}
	<-p.closed
	assert.Equal(t, "line\n", out.String())
}
