package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/utils/exec"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/e2e/vkadapt"
	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/provider/providertest"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server"
)

// vkStreams is a virtual-kubelet provider with virtual-kubelet's logs,
// exec, attach and port-forward methods, plus the three lines of package
// vkadapt that give nodekit the first three. Its logs are three lines, cut
// to opts.Tail; exec runs "echo ..." and "exit N"; attach greets and
// echoes stdin; a forwarded port answers one HTTP request with
// "<pod>:<port>".
type vkStreams struct{ *providertest.Provider }

var (
	_ api.ContainerLogsHandlerFunc   = (&vkStreams{}).GetContainerLogs
	_ api.ContainerExecHandlerFunc   = (&vkStreams{}).RunInContainer
	_ api.ContainerAttachHandlerFunc = (&vkStreams{}).AttachToContainer
	_ api.PortForwardHandlerFunc     = (&vkStreams{}).PortForward
	// virtual-kubelet's PortForward is nodekit's as it is.
	_ provider.PortForwardProvider = (&vkStreams{})
)

func (p *vkStreams) GetContainerLogs(_ context.Context, _, _, _ string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	lines := []string{"one\n", "two\n", "three\n"}
	if opts.Tail > 0 && opts.Tail < len(lines) {
		lines = lines[len(lines)-opts.Tail:]
	}
	return io.NopCloser(strings.NewReader(strings.Join(lines, ""))), nil
}

func (p *vkStreams) RunInContainer(_ context.Context, _, _, _ string, cmd []string, a api.AttachIO) error {
	switch {
	case len(cmd) > 0 && cmd[0] == "echo":
		fmt.Fprintln(a.Stdout(), strings.Join(cmd[1:], " "))
		return nil
	case len(cmd) == 2 && cmd[0] == "exit":
		var code int
		fmt.Sscan(cmd[1], &code)
		return utilexec.CodeExitError{Err: fmt.Errorf("exit %d", code), Code: code}
	}
	return fmt.Errorf("%v: not found", cmd)
}

func (p *vkStreams) AttachToContainer(_ context.Context, _, _, container string, a api.AttachIO) error {
	fmt.Fprintf(a.Stdout(), "attached %s\n", container)
	_, err := io.Copy(a.Stdout(), a.Stdin())
	return err
}

func (p *vkStreams) PortForward(_ context.Context, _, pod string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	req, err := http.ReadRequest(bufio.NewReader(stream))
	if err != nil {
		return err
	}
	body := fmt.Sprintf("%s:%d", pod, port)
	return (&http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1, Close: true, Request: req,
		ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}).Write(stream)
}

// The three lines a provider author adds (package vkadapt).

func (p *vkStreams) ContainerLogs(ctx context.Context, ns, pod, c string, o *corev1.PodLogOptions) (io.ReadCloser, error) {
	return vkadapt.ContainerLogs(ctx, p, ns, pod, c, o)
}

func (p *vkStreams) ExecInContainer(ctx context.Context, ns, pod, c string, cmd []string, s runtime.AttachIO) error {
	return vkadapt.Exec(ctx, p, ns, pod, c, cmd, s)
}

func (p *vkStreams) AttachContainer(ctx context.Context, ns, pod, c string, s runtime.AttachIO) error {
	return vkadapt.Attach(ctx, p, ns, pod, c, s)
}

// kubectl logs, exec, attach and port-forward through a real apiserver to
// a virtual-kubelet provider run by nodekit: the provider's own methods
// serve them, as under virtual-kubelet.
func TestProviderLogsExecAttachPortForwardThroughTheAPIServer(t *testing.T) {
	waitSPDYShutdowns(t)
	c, cs := streamingCluster(t)
	ctx := t.Context()
	rt, err := provider.New(provider.Config{Provider: &vkStreams{providertest.New(nil)}, PollPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	startStreamingNode(t, cs, "vk-streams", rt, func(cfg *server.Config) {
		cfg.Logs, cfg.Streaming, cfg.PortForward = rt.KubeletAPI()
	})
	pod := testPod("vkpod", "vk-streams")
	pod.Spec.Containers[0].Stdin = true
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, "default", "vkpod", func(p *corev1.Pod) string {
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			return fmt.Sprintf("status %+v, want Running", p.Status)
		}
		return ""
	})
	cfg := c.RESTConfig()

	t.Run("logs with tailLines", func(t *testing.T) {
		b, err := cs.CoreV1().Pods("default").GetLogs("vkpod", &corev1.PodLogOptions{Container: "c", TailLines: ptr.To[int64](2)}).DoRaw(ctx)
		if err != nil || string(b) != "two\nthree\n" {
			t.Fatalf("logs: %v, %q, want the provider's last two lines", err, b)
		}
	})
	for name, ex := range executors(t, cfg, execURL(cs, "default", "vkpod", "exec",
		&corev1.PodExecOptions{Container: "c", Command: []string{"echo", "hi"}, Stdout: true, Stderr: true})) {
		t.Run("exec over "+name, func(t *testing.T) {
			var out bytes.Buffer
			if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: io.Discard}); err != nil || out.String() != "hi\n" {
				t.Fatalf("exec: %v, stdout %q, want hi", err, out.String())
			}
		})
	}
	for name, ex := range executors(t, cfg, execURL(cs, "default", "vkpod", "exec",
		&corev1.PodExecOptions{Container: "c", Command: []string{"exit", "3"}, Stdout: true})) {
		t.Run("exec over "+name+": exit code", func(t *testing.T) {
			err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
			if code, ok := exitCode(err); !ok || code != 3 {
				t.Fatalf("exec: %v, want exit code 3", err)
			}
		})
	}
	ex := executors(t, cfg, execURL(cs, "default", "vkpod", "attach",
		&corev1.PodAttachOptions{Container: "c", Stdin: true, Stdout: true}))["SPDY"]
	t.Run("attach", func(t *testing.T) {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		var out bytes.Buffer
		err := ex.StreamWithContext(actx, remotecommand.StreamOptions{Stdin: strings.NewReader("typed\n"), Stdout: &out})
		if err != nil || out.String() != "attached c\ntyped\n" {
			t.Fatalf("attach: %v, stdout %q", err, out.String())
		}
	})
	t.Run("port-forward", func(t *testing.T) {
		body, err := forward(t, ctx, cfg, cs, "default", "vkpod", 8080, false)
		if err != nil || body != "vkpod:8080" {
			t.Fatalf("port-forward: %v, body %q", err, body)
		}
	})
}
