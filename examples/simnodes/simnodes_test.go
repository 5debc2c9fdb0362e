package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodekit/nodekit/e2e/cluster"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/sim"
)

func TestShardsCoverEveryNodeOnce(t *testing.T) {
	for _, tc := range []struct{ nodes, shards int }{{1, 1}, {10, 3}, {1000, 4}, {7, 7}} {
		seen := map[string]int{}
		for i := range tc.shards {
			from, to := shardRange(tc.nodes, i, tc.shards)
			if to-from < tc.nodes/tc.shards || to-from > tc.nodes/tc.shards+1 {
				t.Errorf("%d nodes, shard %d/%d: %d nodes, want about %d", tc.nodes, i, tc.shards, to-from, tc.nodes/tc.shards)
			}
			for k := from; k < to; k++ {
				seen[nodeName("n-", k, tc.nodes)]++
			}
		}
		if len(seen) != tc.nodes {
			t.Errorf("%d nodes over %d shards: %d distinct names", tc.nodes, tc.shards, len(seen))
		}
		for name, c := range seen {
			if c != 1 {
				t.Errorf("%s in %d shards", name, c)
			}
		}
	}
}

func TestNodeNamesSortAsNumbers(t *testing.T) {
	for _, tc := range []struct {
		k, nodes int
		want     string
	}{{0, 1, "n-0"}, {7, 10, "n-7"}, {7, 11, "n-07"}, {42, 1000, "n-042"}, {999, 1000, "n-999"}} {
		if got := nodeName("n-", tc.k, tc.nodes); got != tc.want {
			t.Errorf("nodeName(%d of %d) = %q, want %q", tc.k, tc.nodes, got, tc.want)
		}
	}
}

func TestNodesGetDisjointPodCIDRsAndAddresses(t *testing.T) {
	p := netip.MustParsePrefix("10.128.0.0/9")
	for _, tc := range []struct {
		k    int
		cidr string
		ip   string
	}{{0, "10.128.0.0/24", "172.16.0.1"}, {1, "10.128.1.0/24", "172.16.0.2"}, {256, "10.129.0.0/24", "172.16.1.1"}} {
		if got := nthBlock(p, 24, tc.k).String(); got != tc.cidr {
			t.Errorf("node %d pod CIDR %s, want %s", tc.k, got, tc.cidr)
		}
		if got := nthHost(netip.MustParsePrefix("172.16.0.0/12"), tc.k).String(); got != tc.ip {
			t.Errorf("node %d IP %s, want %s", tc.k, got, tc.ip)
		}
	}
}

func TestBadFlagsAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-shard", "4/4"}, {"-shard", "1"}, {"-shard", "-1/2"}, {"-nodes", "0"}, {"-nodes", "2", "-shard", "0/3"},
		{"-pod-cidr", "10.0.0.0/24", "-nodes", "2"}, {"-pod-cidr", "fd00::/8"}, {"-node-cidr-size", "31"},
		{"-node-ip-cidr", "10.0.0.0/30", "-nodes", "3"}, {"-node-labels", "novalue"}, {"-cpu", "-1"}, {"-qps", "0"},
		{"-pleg-event-capacity", "0"}, {"-gc-percent", "-1"}, {"-memory-limit", "-1"}, {"-first-status-delay", "-1s"},
		{"-processes", "0"}, {"-nodes", "2", "-processes", "3"}, {"-nodes", "4", "-processes", "2", "-shard", "1/2"},
		{"-pprof-addr", "6060"}, {"-max-in-flight", "0"},
		{"extra"},
	} {
		_, err := parseFlags(append([]string{"-kubeconfig", "kc"}, args...), io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: err %v, want a usage error", args, err)
		}
	}
}

// startCluster runs etcd and kube-apiserver for t and writes an admin
// kubeconfig; skipped without the servers (TestMain failed the run under
// CI=true).
func startCluster(t *testing.T) (*cluster.Cluster, string) {
	t.Helper()
	if servers.err != nil {
		t.Skipf("no etcd/kube-apiserver (%v); build them with: bash e2e/hack/servers.sh build", servers.err)
	}
	c, err := cluster.Start(t.Context(), cluster.Config{Binaries: servers.bins})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	rc := c.RESTConfig()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "admin"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return c, path
}

// shard is one running simnodes process (in this one).
type shard struct {
	cancel context.CancelFunc
	done   chan error
	log    *testenv.Buffer
	once   sync.Once
}

func startShard(t *testing.T, args ...string) *shard {
	ctx, cancel := context.WithCancel(context.Background())
	s := &shard{cancel: cancel, done: make(chan error, 1), log: &testenv.Buffer{}}
	go func() { s.done <- run(ctx, args, s.log) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *shard) stop(t *testing.T) {
	s.once.Do(func() {
		s.cancel()
		select {
		case err := <-s.done:
			if err != nil {
				t.Errorf("shard: %v\n%s", err, s.log.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("shard did not stop within 30s\n%s", s.log.String())
		}
	})
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v; last: %s", what, timeout, last)
}

// TestShardsOnARealAPIServer: two shards of four nodes register their
// Nodes (Ready, with pod CIDR, InternalIP and labels), a pod bound by name
// runs through the real pipeline (a readiness probe on the in-memory
// network passes once the ready-after script says, a crashing container
// is restarted), and stopping a shard leaves its Leases unrenewed while the
// other shard's go on.
func TestShardsOnARealAPIServer(t *testing.T) {
	c, kubeconfig := startCluster(t)
	cs := kubernetes.NewForConfigOrDie(c.RESTConfig())
	ctx := t.Context()
	args := []string{"-kubeconfig", kubeconfig, "-nodes", "4", "-name-prefix", "sn-", "-node-labels", "zone=a"}
	s0 := startShard(t, append(args, "-shard", "0/2")...)
	s1 := startShard(t, append(args, "-shard", "1/2")...)

	names := []string{"sn-0", "sn-1", "sn-2", "sn-3"}
	eventually(t, 60*time.Second, "4 Nodes Ready", func() (bool, string) {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: SimnodeLabel + "=sn"})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, n := range l.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue && n.Spec.PodCIDR != "" {
					ready++
				}
			}
		}
		return ready == 4, "ready with a pod CIDR: " + string(rune('0'+ready))
	})
	for i, name := range names {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantCIDR := nthBlock(netip.MustParsePrefix("10.128.0.0/9"), 24, i).String()
		wantIP := nthHost(netip.MustParsePrefix("172.16.0.0/12"), i).String()
		if n.Spec.PodCIDR != wantCIDR || n.Labels["zone"] != "a" || !hasAddress(n, v1.NodeInternalIP, wantIP) {
			t.Errorf("node %s: podCIDR %q, labels %v, addresses %v; want %s, zone=a, InternalIP %s",
				name, n.Spec.PodCIDR, n.Labels, n.Status.Addresses, wantCIDR, wantIP)
		}
	}

	// A pod bound to shard 1's last node: ready 2s after its start by its
	// httpGet readiness probe; a second container crashes after 1s and is
	// restarted.
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{
			sim.ReadyAfterAnnotation: "app=2s", sim.ExitAnnotation: "crash=1s:3",
		}},
		Spec: v1.PodSpec{
			NodeName: "sn-3",
			Containers: []v1.Container{{
				Name: "app", Image: "example.com/app:1", Ports: []v1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{
					HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
			}, {Name: "crash", Image: "example.com/crash:1"}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "pod Running, app Ready, crash restarted", func() (bool, string) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var appReady bool
		var restarts int32
		for _, st := range p.Status.ContainerStatuses {
			switch st.Name {
			case "app":
				appReady = st.Ready
			case "crash":
				restarts = st.RestartCount
			}
		}
		inCIDR := p.Status.PodIP != "" && netip.MustParsePrefix("10.128.3.0/24").Contains(netip.MustParseAddr(p.Status.PodIP))
		return p.Status.Phase == v1.PodRunning && appReady && restarts >= 1 && inCIDR,
			string(p.Status.Phase) + " podIP " + p.Status.PodIP + " " + containerStates(p)
	})

	// Stopping shard 1 leaves sn-2's and sn-3's Leases as they are; shard
	// 0 renews sn-0's and sn-1's every 10s.
	renewed := func() map[string]time.Time {
		out := map[string]time.Time{}
		for _, name := range names {
			l, err := cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out[name] = l.Spec.RenewTime.Time
		}
		return out
	}
	s1.stop(t)
	before := renewed()
	time.Sleep(12 * time.Second)
	after := renewed()
	for _, name := range names[:2] {
		if !after[name].After(before[name]) {
			t.Errorf("running shard's Lease %s not renewed in 12s: %v", name, after[name])
		}
	}
	for _, name := range names[2:] {
		if !after[name].Equal(before[name]) {
			t.Errorf("stopped shard's Lease %s renewed: %v then %v", name, before[name], after[name])
		}
	}
	s0.stop(t)
	if t.Failed() {
		t.Logf("shard 0:\n%s\nshard 1:\n%s", s0.log.String(), s1.log.String())
	}
}

func hasAddress(n *v1.Node, typ v1.NodeAddressType, addr string) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == typ && a.Address == addr {
			return true
		}
	}
	return false
}

func containerStates(p *v1.Pod) string {
	var b bytes.Buffer
	for _, st := range p.Status.ContainerStatuses {
		b.WriteString(st.Name)
		switch {
		case st.State.Running != nil:
			b.WriteString(" running")
		case st.State.Waiting != nil:
			b.WriteString(" waiting " + st.State.Waiting.Reason)
		case st.State.Terminated != nil:
			b.WriteString(" terminated " + st.State.Terminated.Reason)
		}
		if st.Ready {
			b.WriteString(" ready")
		}
		b.WriteString(" restarts " + string(rune('0'+min(st.RestartCount, 9))) + "; ")
	}
	return b.String()
}
