package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/stats"
	"github.com/nodekit/nodekit/status"
)

// The stats summary and resource metrics as metrics-server and `kubectl
// get --raw /api/v1/nodes/<node>/proxy/stats/summary` read them: through
// the apiserver's nodes/proxy to the node's kubelet endpoint (its
// InternalIP and daemonEndpoints port, over TLS) on an in-process agent
// whose runtime/fake pod has scripted usage.
func TestStatsThroughNodesProxy(t *testing.T) {
	c := startCluster(t)
	cs, _ := clientset(t, c.RESTConfig(), 50, 100)
	ctx := t.Context()

	// The apiserver proxies to no loopback address: serve on the host's.
	ip := hostIP(t)
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var handler http.Handler = http.NotFoundHandler()
	ready := make(chan struct{})
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-ready
		handler.ServeHTTP(w, r)
	}))
	ts.Listener.Close()
	ts.Listener = l
	ts.StartTLS()
	defer ts.Close()
	port := l.Addr().(*net.TCPAddr).Port

	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rt.SetContainerBehavior("c", fake.Behavior{Usage: fake.Usage{CPUMilli: 250, MemoryBytes: 50 << 20, DiskBytes: 1 << 20}})
	a, err := agent.New(agent.Config{
		NodeName: "stats-node", Runtime: rt, PodSource: cs.CoreV1().Pods(""),
		StatusClient: func(ns string) status.PodClient { return cs.CoreV1().Pods(ns) }, NodeIPs: []string{"127.0.0.1"}, RelistPeriod: 200 * time.Millisecond,
		Node: &node.Config{Nodes: cs.CoreV1().Nodes(), Leases: cs.CoordinationV1().Leases(corev1.NamespaceNodeLease), KubeletPort: int32(port),
			// The apiserver dials the Hostname address first: only the IP.
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := stats.New(stats.Config{NodeName: "stats-node", Runtime: rt, UpdatePeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Pods: a, Stats: sp, ResourceMetrics: sp})
	if err != nil {
		t.Fatal(err)
	}
	handler = srv.Handler()
	close(ready)
	sctx, stop := context.WithCancel(context.Background())
	statsDone := make(chan error, 1)
	go func() { statsDone <- sp.Run(sctx) }()
	t.Cleanup(func() { stop(); <-statsDone })
	runAgent(t, a)

	waitNode(t, cs, "stats-node", 30*time.Second, readyIs(corev1.ConditionTrue, "kubelet is posting ready status"))
	if _, err := cs.CoreV1().Pods("default").Create(ctx, testPod("busy", "stats-node"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, "default", "busy", func(p *corev1.Pod) string { return checkRunning(p, "") })

	proxy := func(path string) []byte {
		t.Helper()
		b, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/stats-node/proxy" + path).DoRaw(ctx)
		if err != nil {
			t.Fatalf("GET nodes/stats-node/proxy%s: %v: %s", path, err, b)
		}
		return b
	}
	var pod *statsapi.PodStats
	deadline := time.Now().Add(30 * time.Second)
	for pod == nil || pod.CPU == nil || pod.CPU.UsageNanoCores == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no CPU rate for pod busy after 30s: %+v", pod)
		}
		time.Sleep(200 * time.Millisecond)
		var s statsapi.Summary
		if err := json.Unmarshal(proxy("/stats/summary"), &s); err != nil {
			t.Fatal(err)
		}
		if s.Node.NodeName != "stats-node" {
			t.Fatalf("node name %q", s.Node.NodeName)
		}
		pod = nil
		for i := range s.Pods {
			if s.Pods[i].PodRef.Name == "busy" {
				pod = &s.Pods[i]
			}
		}
	}
	if got := *pod.CPU.UsageNanoCores; got < 2.4e8 || got > 2.6e8 {
		t.Errorf("pod CPU %d nanocores, want 250m", got)
	}
	if got := *pod.Memory.WorkingSetBytes; got != 50<<20 {
		t.Errorf("pod working set %d, want 50Mi", got)
	}
	if got := *pod.EphemeralStorage.UsedBytes; got != 1<<20 {
		t.Errorf("pod ephemeral storage %d, want 1Mi", got)
	}

	metrics := string(proxy("/metrics/resource"))
	for _, want := range []string{
		`container_memory_working_set_bytes{container="c",namespace="default",pod="busy"} 5.24288e+07`,
		"# TYPE node_cpu_usage_seconds_total counter",
		"resource_scrape_error 0",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics/resource has no %q:\n%s", want, metrics)
		}
	}
}

// hostIP is an IPv4 address of this host other than loopback and
// link-local, which the apiserver's node proxy accepts.
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true and no non-loopback IPv4 address for the apiserver to proxy to")
	}
	t.Skip("no non-loopback IPv4 address for the apiserver to proxy to")
	return ""
}
