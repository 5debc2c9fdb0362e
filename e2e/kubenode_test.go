package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodekit/nodekit/internal/testenv"
)

// buildKubenode builds examples/kubenode (a module of its own); -race
// shares the build cache with the e2e binary's client-go.
func buildKubenode(t *testing.T) string {
	return testenv.BuildProgram(t, filepath.Join("..", "examples", "kubenode"), "-race")
}

// writeKubeconfig writes a kubeconfig for cfg's apiserver with its client
// certificate, acting as user as if not empty.
func writeKubeconfig(t *testing.T, cfg *rest.Config, host, as string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Impersonate: as}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	kc.CurrentContext = "e2e"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

type kubenode struct {
	cmd    *exec.Cmd
	stderr *testenv.Buffer
	done   chan struct{}
	err    error
}

func startKubenode(t *testing.T, bin string, args ...string) *kubenode {
	t.Helper()
	// No node-pressure eviction unless a test asks for it: these nodes
	// run on the test machine's own disk and memory, and the kubelet's
	// default thresholds (imagefs.available<15%, say) would refuse every
	// pod on a runner whose disk other work filled, failing tests that
	// are not about eviction (TestEvictionUnder* in the agent are).
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-eviction-hard") }) {
		args = append([]string{"-eviction-hard="}, args...)
	}
	k := &kubenode{cmd: exec.Command(bin, args...), stderr: &testenv.Buffer{}, done: make(chan struct{})}
	k.cmd.Stderr = k.stderr
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { k.err = k.cmd.Wait(); close(k.done) }()
	t.Cleanup(func() {
		select {
		case <-k.done:
		default:
			k.cmd.Process.Kill()
			<-k.done
		}
		if t.Failed() {
			t.Logf("kubenode %v stderr:\n%s", args, k.stderr.String())
		}
	})
	return k
}

// wait waits for the program to exit and returns its exit code.
func (k *kubenode) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-k.done:
	case <-time.After(timeout):
		t.Fatalf("kubenode still running after %v; stderr:\n%s", timeout, k.stderr.String())
	}
	var ee *exec.ExitError
	if errors.As(k.err, &ee) {
		return ee.ExitCode()
	}
	if k.err != nil {
		t.Fatal(k.err)
	}
	return 0
}

func TestKubenodeCommand(t *testing.T) {
	c := startCluster(t)
	cs, _ := clientset(t, c.RESTConfig(), 50, 100)
	bin := buildKubenode(t)
	cfg := c.RESTConfig()
	kubeconfig := writeKubeconfig(t, cfg, cfg.Host, "")

	t.Run("joins the cluster, runs a bound pod, records its events and stops on SIGTERM", func(t *testing.T) {
		port := testenv.FreePort(t)
		k := startKubenode(t, bin, "-kubeconfig", kubeconfig, "-node-name", "cmd-node", "-node-ip", "127.0.0.1",
			"-node-labels", "pool=cmd", "-max-pods", "20", "-port", strconv.Itoa(port))
		n := waitNode(t, cs, "cmd-node", time.Minute, readyIs(corev1.ConditionTrue, "kubelet is posting ready status"))
		if n.Labels["pool"] != "cmd" {
			t.Errorf("labels %v", n.Labels)
		}
		if q := n.Status.Capacity[corev1.ResourcePods]; q.Value() != 20 {
			t.Errorf("pods capacity %s, want 20", q.String())
		}
		if got := n.Status.DaemonEndpoints.KubeletEndpoint.Port; got != int32(port) {
			t.Errorf("daemonEndpoints.kubeletEndpoint.port %d, want -port %d", got, port)
		}
		// A pull secret that does not exist: the pod runs, and the kubelet's
		// warning about it reaches the apiserver as an Event.
		p := testPod("on-cmd-node", "cmd-node")
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "no-such-secret"}}
		if _, err := cs.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPod(t, cs, "default", "on-cmd-node", func(p *corev1.Pod) string { return checkRunning(p, "") })
		ev := waitEvent(t, cs, "default", "on-cmd-node", "FailedToRetrieveImagePullSecret", 30*time.Second)
		if ev.Type != corev1.EventTypeWarning || ev.Source.Component != "kubelet" || ev.Source.Host != "cmd-node" ||
			ev.InvolvedObject.Kind != "Pod" || !strings.Contains(ev.Message, "no-such-secret") {
			t.Errorf("event %+v, want a kubelet Warning from cmd-node about the pod naming no-such-secret", ev)
		}
		leaseRenewals(t, cs, "cmd-node", 1)

		if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := k.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("exit code %d after SIGTERM, want 0", code)
		}
	})

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a kubeconfig that reaches no apiserver is a clear error at start",
			[]string{"-kubeconfig", writeKubeconfig(t, cfg, "https://127.0.0.1:1", ""), "-node-name", "x"}, 1,
			"no apiserver answers at https://127.0.0.1:1"},
		{"a node name that is not a DNS subdomain is a usage error",
			[]string{"-kubeconfig", kubeconfig, "-node-name", "Bad_Name"}, 2, `-node-name "Bad_Name"`},
		{"a missing kubeconfig is named",
			[]string{"-kubeconfig", filepath.Join(t.TempDir(), "none"), "-node-name", "x"}, 1, "-kubeconfig"},
		{"an apiserver that refuses the Node says which permission",
			[]string{"-kubeconfig", writeKubeconfig(t, cfg, cfg.Host, "bob"), "-node-name", "bobs-node"}, 1,
			`User "bob" cannot create resource "nodes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := startKubenode(t, bin, tc.args...)
			if code := k.wait(t, time.Minute); code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
			if out := k.stderr.String(); !strings.Contains(out, tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, out)
			}
		})
	}
}

// waitEvent waits for an Event with reason about the named pod.
func waitEvent(t *testing.T, cs kubernetes.Interface, ns, pod, reason string, timeout time.Duration) corev1.Event {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		list, err := cs.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Reason == reason {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for pod %s/%s within %v; events: %+v", reason, ns, pod, timeout, list.Items)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
