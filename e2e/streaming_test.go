package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/e2e/cluster"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/status"
)

// streamingCluster is a cluster whose apiserver reaches a node's kubelet
// API at its InternalIP (127.0.0.1) and the port the Node advertises.
func streamingCluster(t *testing.T) (*cluster.Cluster, *kubernetes.Clientset) {
	t.Helper()
	c := startClusterWith(t, cluster.Config{APIServerArgs: []string{"--kubelet-preferred-address-types=InternalIP"}})
	cs, _ := clientset(t, c.RESTConfig(), 50, 100)
	return c, cs
}

// startStreamingNode runs an agent for the node name on rt, and its
// kubelet API on HTTPS on a loopback port the Node advertises
// (daemonEndpoints), with the streaming parts streams adds to the config.
// The server has no auth: the apiserver presents no client certificate.
func startStreamingNode(t *testing.T, cs *kubernetes.Clientset, name string, rt runtime.Runtime, streams func(*server.Config)) {
	t.Helper()
	mux := http.NewServeMux()
	ts := httptest.NewUnstartedServer(mux)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	a, err := agent.New(agent.Config{
		NodeName:     name,
		Runtime:      rt,
		PodSource:    cs.CoreV1().Pods(""),
		StatusClient: func(ns string) status.PodClient { return cs.CoreV1().Pods(ns) },
		NodeIPs:      []string{"127.0.0.1"},
		RelistPeriod: 200 * time.Millisecond,
		Node: &node.Config{
			Nodes:          cs.CoreV1().Nodes(),
			Leases:         cs.CoordinationV1().Leases(corev1.NamespaceNodeLease),
			KubeletPort:    int32(port),
			KubeletVersion: "v1.37.0-nodekit",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Pods: a, RunningPods: rt}
	streams(&cfg)
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/", s.Handler())
	runAgent(t, a)
	waitNode(t, cs, name, time.Minute, func(n *corev1.Node) string {
		if got := n.Status.DaemonEndpoints.KubeletEndpoint.Port; got != int32(port) {
			return fmt.Sprintf("kubelet port %d, want %d", got, port)
		}
		return ""
	})
}

// executors are client-go's three ways of running a remotecommand session
// through the apiserver.
func executors(t *testing.T, cfg *rest.Config, u *url.URL) map[string]remotecommand.Executor {
	t.Helper()
	spdyExec, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
	if err != nil {
		t.Fatal(err)
	}
	fallback, err := remotecommand.NewFallbackExecutor(wsExec, spdyExec, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]remotecommand.Executor{"SPDY": spdyExec, "WebSocket": wsExec, "WebSocket with SPDY fallback": fallback}
}

func execURL(cs *kubernetes.Clientset, ns, pod, sub string, opts apiruntime.Object) *url.URL {
	return cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource(sub).
		VersionedParams(opts, scheme.ParameterCodec).URL()
}

// sizes is a TerminalSizeQueue that sends one size, then none.
type sizes struct {
	once sync.Once
	size remotecommand.TerminalSize
	done chan struct{}
}

func oneSize(w, h uint16) *sizes {
	return &sizes{size: remotecommand.TerminalSize{Width: w, Height: h}, done: make(chan struct{})}
}

func (s *sizes) Next() *remotecommand.TerminalSize {
	var first bool
	s.once.Do(func() { first = true })
	if first {
		return &s.size
	}
	<-s.done // until the session ends (closed by the test)
	return nil
}

func exitCode(err error) (int, bool) {
	var ce utilexec.CodeExitError
	if errors.As(err, &ce) {
		return ce.Code, true
	}
	return 0, false
}

// forward runs client-go's port forwarder (SPDY, or SPDY tunneled in a
// WebSocket with the fallback as kubectl does) to port of the pod, sends an
// HTTP GET through it and returns the body.
func forward(t *testing.T, ctx context.Context, cfg *rest.Config, cs *kubernetes.Clientset, ns, pod string, port int, tunnel bool) (string, error) {
	t.Helper()
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	tr, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var dialer httpstream.Dialer = spdy.NewDialer(upgrader, &http.Client{Transport: tr}, http.MethodPost, u)
	if tunnel {
		ws, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
		if err != nil {
			t.Fatal(err)
		}
		dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut bytes.Buffer
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	defer func() {
		close(stop)
		<-done
	}()
	select {
	case <-ready:
	case err := <-done:
		done <- err
		return "", fmt.Errorf("port forward never ready: %v (%s)", err, errOut.String())
	case <-ctx.Done():
		return "", ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", ports[0].Local), nil)
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET through the forward: %w (forwarder said %q)", err, errOut.String())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET through the forward: %s %q", resp.Status, body)
	}
	return string(body), err
}

// waitSPDYShutdowns waits, when t ends, until no spdystream connection is
// shutting down: one waits for its streams to be gone, which the other
// side's close brings a moment after client-go's executor or forwarder has
// returned (under -race on a loaded machine, after TestMain's leak check
// gave up). It ends by itself; this keeps the check to real leaks.
func waitSPDYShutdowns(t *testing.T) {
	t.Cleanup(func() {
		buf := make([]byte, 1<<22)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			n := goruntime.Stack(buf, true)
			if !bytes.Contains(buf[:n], []byte("spdystream.(*Connection).shutdown")) {
				return
			}
			if time.Now().After(deadline) {
				t.Error("spdystream connections still shutting down 30s after the test")
				return
			}
		}
	})
}

// kubectl exec, attach and port-forward through a real apiserver to a node
// whose runtime streams in process (runtime/fake): the apiserver proxies
// each to the node's /exec, /attach and /portForward.
func TestStreamingThroughTheAPIServerOnTheFakeRuntime(t *testing.T) {
	waitSPDYShutdowns(t)
	c, cs := streamingCluster(t)
	ctx := t.Context()
	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	startStreamingNode(t, cs, "streams", rt, func(cfg *server.Config) {
		cfg.Streaming, cfg.PortForward = rt, rt
	})
	pod := testPod("shell", "streams")
	pod.Spec.Containers[0].Stdin = true
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, "default", "shell", func(p *corev1.Pod) string { return checkRunning(p, "") })
	rt.SetExecResult("c", []string{"fail"}, fake.ExecResult{Stdout: "out\n", Stderr: "err\n", ExitCode: 3})
	rt.SetExecResult("c", []string{"cat"}, fake.ExecResult{EchoStdin: true})
	cfg := c.RESTConfig()

	for name, ex := range executors(t, cfg, execURL(cs, "default", "shell", "exec",
		&corev1.PodExecOptions{Container: "c", Command: []string{"fail"}, Stdout: true, Stderr: true})) {
		t.Run("exec over "+name+": output and exit code", func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
			if code, ok := exitCode(err); !ok || code != 3 {
				t.Fatalf("exec: %v, want exit code 3", err)
			}
			if out.String() != "out\n" || errOut.String() != "err\n" {
				t.Fatalf("stdout %q, stderr %q", out.String(), errOut.String())
			}
		})
	}
	for name, ex := range executors(t, cfg, execURL(cs, "default", "shell", "exec",
		&corev1.PodExecOptions{Container: "c", Command: []string{"cat"}, Stdin: true, Stdout: true, Stderr: true})) {
		t.Run("exec over "+name+": stdin", func(t *testing.T) {
			var out bytes.Buffer
			err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("hello\n"), Stdout: &out, Stderr: io.Discard})
			if err != nil || out.String() != "hello\n" {
				t.Fatalf("exec: %v, stdout %q, want hello", err, out.String())
			}
		})
	}
	for name, ex := range executors(t, cfg, execURL(cs, "default", "shell", "exec",
		&corev1.PodExecOptions{Container: "c", Command: []string{"fail"}, Stdout: true, TTY: true})) {
		t.Run("exec over "+name+": a TTY carries stderr", func(t *testing.T) {
			var out bytes.Buffer
			q := oneSize(100, 40)
			defer close(q.done)
			err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Tty: true, TerminalSizeQueue: q})
			if code, ok := exitCode(err); !ok || code != 3 {
				t.Fatalf("exec: %v, want exit code 3", err)
			}
			if out.String() != "out\nerr\n" {
				t.Fatalf("stdout %q, want both streams", out.String())
			}
		})
	}
	// One pod per attach: the session ends when its container exits, as
	// client-go leaves goroutines behind when the client cancels instead.
	attached := map[string]*corev1.Pod{}
	for i, name := range []string{"SPDY", "WebSocket", "WebSocket with SPDY fallback"} {
		p := testPod(fmt.Sprintf("attached-%d", i), "streams")
		p.Spec.Containers[0].Stdin = true
		created, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		attached[name] = created
	}
	for name, p := range attached {
		waitPod(t, cs, "default", p.Name, func(p *corev1.Pod) string { return checkRunning(p, "") })
		ex := executors(t, cfg, execURL(cs, "default", p.Name, "attach",
			&corev1.PodAttachOptions{Container: "c", Stdin: true, Stdout: true, Stderr: true}))[name]
		t.Run("attach over "+name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			out := &testenv.Buffer{}
			done := make(chan error, 1)
			go func() {
				done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: pr, Stdout: out, Stderr: io.Discard})
			}()
			// The container echoes its stdin to its output (its spec has
			// stdin); a line sent before the session is up is lost, so send
			// until one comes back.
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(out.String(), "ping\n") {
				if time.Now().After(deadline) {
					t.Fatalf("attach: nothing came back; output %q", out.String())
				}
				if _, err := pw.Write([]byte("ping\n")); err != nil {
					t.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err := rt.ExitContainer(p.UID, "c", 0, "Completed"); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("attach ended with %v, want nil once the container exited", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("attach outlived its container")
			}
		})
	}
	for _, tunnel := range []bool{false, true} {
		t.Run(fmt.Sprintf("port-forward (tunneled in a WebSocket: %v)", tunnel), func(t *testing.T) {
			body, err := forward(t, ctx, cfg, cs, "default", "shell", 8080, tunnel)
			if err != nil || body != "ok" {
				t.Fatalf("port-forward: %v, body %q, want the fake pod's ok", err, body)
			}
		})
	}
	t.Run("exec in a container that does not exist", func(t *testing.T) {
		ex, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, execURL(cs, "default", "shell", "exec",
			&corev1.PodExecOptions{Container: "nope", Command: []string{"ls"}, Stdout: true}))
		if err != nil {
			t.Fatal(err)
		}
		err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
		if err == nil || !strings.Contains(err.Error(), "nope") {
			t.Fatalf("exec: %v, want an error naming the container", err)
		}
	})
}

// The same through the apiserver on containerd: the node's server proxies
// to containerd's own streaming server (runtime/cri's StreamURLer).
func TestStreamingThroughTheAPIServerOnContainerd(t *testing.T) {
	waitSPDYShutdowns(t)
	// Exclusive: the agent kills the runtime pods it does not know.
	endpoint := testenv.ExclusiveCRIEndpoint(t)
	image := testenv.TestImage(t)
	c, cs := streamingCluster(t)
	ctx := t.Context()
	m, err := cri.New(ctx, cri.Config{Endpoint: endpoint, PodsRoot: t.TempDir(), PodLogsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	startStreamingNode(t, cs, "streams-cri", m, func(cfg *server.Config) { cfg.StreamURLs = m })
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.PodSpec{
			NodeName: "streams-cri", TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "main", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sh", "-c", "mkdir -p /www && echo hello from httpd > /www/index.html && exec httpd -f -p 8080 -h /www"}}},
		},
	}
	// A cat per attach: its stdin closes with the client's (stdinOnce),
	// so it exits and the session ends.
	for i := range 3 {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: fmt.Sprintf("pipe-%d", i), Image: image,
			ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"cat"}, Stdin: true, StdinOnce: true})
	}
	got, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removePod(t, cs, endpoint, "default", got.Name, got.UID) })
	waitPod(t, cs, "default", "web", func(p *corev1.Pod) string { return checkRunning(p, "") })
	cfg := c.RESTConfig()

	for name, ex := range executors(t, cfg, execURL(cs, "default", "web", "exec", &corev1.PodExecOptions{Container: "main",
		Command: []string{"sh", "-c", "echo out; echo err >&2; read x; echo got $x; exit 3"}, Stdin: true, Stdout: true, Stderr: true})) {
		t.Run("exec over "+name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("hello\n"), Stdout: &out, Stderr: &errOut})
			if code, ok := exitCode(err); !ok || code != 3 {
				t.Fatalf("exec: %v, want exit code 3", err)
			}
			if out.String() != "out\ngot hello\n" || errOut.String() != "err\n" {
				t.Fatalf("stdout %q, stderr %q", out.String(), errOut.String())
			}
		})
	}
	for name, ex := range executors(t, cfg, execURL(cs, "default", "web", "exec", &corev1.PodExecOptions{Container: "main",
		Command: []string{"sh", "-c", `for i in 1 2 3 4 5 6 7 8 9 10; do s=$(stty size <&2 2>/dev/null); [ "$s" = "40 100" ] && break; sleep 0.2; done; echo $s`},
		Stdout:  true, TTY: true})) {
		t.Run("exec with a TTY over "+name, func(t *testing.T) {
			var out bytes.Buffer
			q := oneSize(100, 40)
			defer close(q.done)
			if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Tty: true, TerminalSizeQueue: q}); err != nil {
				t.Fatal(err)
			}
			if out.String() != "40 100\r\n" {
				t.Fatalf("stdout %q, want the terminal's size", out.String())
			}
		})
	}
	for i, name := range []string{"SPDY", "WebSocket", "WebSocket with SPDY fallback"} {
		ex := executors(t, cfg, execURL(cs, "default", "web", "attach",
			&corev1.PodAttachOptions{Container: fmt.Sprintf("pipe-%d", i), Stdin: true, Stdout: true, Stderr: true}))[name]
		t.Run("attach over "+name, func(t *testing.T) {
			var out bytes.Buffer
			err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("hello cat\n"), Stdout: &out, Stderr: io.Discard})
			if err != nil || out.String() != "hello cat\n" {
				t.Fatalf("attach: %v, stdout %q, want cat's echo", err, out.String())
			}
		})
	}
	for _, tunnel := range []bool{false, true} {
		t.Run(fmt.Sprintf("port-forward to httpd (tunneled in a WebSocket: %v)", tunnel), func(t *testing.T) {
			var body string
			var err error
			for i := 0; i < 50; i++ { // httpd may not listen yet
				if body, err = forward(t, ctx, cfg, cs, "default", "web", 8080, tunnel); err == nil {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err != nil || body != "hello from httpd\n" {
				t.Fatalf("port-forward: %v, body %q", err, body)
			}
		})
	}
}
