package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/e2e/cluster"
)

// servers is set once by TestMain, before any test runs, and only read after.
var servers struct {
	bins cluster.Binaries
	err  error
}

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	servers.bins, servers.err = cluster.FindBinaries(ctx, "hack/servers.sh", os.Stderr)
	cancel()
	if servers.err != nil && os.Getenv("CI") == "true" {
		fmt.Fprintf(os.Stderr, "e2e: CI=true and the servers cannot be had: %v\n", servers.err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// virtual-kubelet's node/api (package vkadapt) starts opencensus's
		// view worker at init.
		if err := goleak.Find(goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start")); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: goroutines leaked: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startCluster runs a fresh etcd and kube-apiserver for t, stopped when t
// ends however it ends. Without the server binaries t is skipped (TestMain
// has already failed the run under CI=true).
func startCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	return startClusterWith(t, cluster.Config{})
}

// startClusterWith is startCluster with cfg; its Binaries are filled in.
func startClusterWith(t *testing.T, cfg cluster.Config) *cluster.Cluster {
	t.Helper()
	if servers.err != nil {
		t.Skipf("no etcd/kube-apiserver (%v); build them with: bash e2e/hack/servers.sh build", servers.err)
	}
	cfg.Binaries = servers.bins
	c, err := cluster.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// clientset returns a client for cfg with rate limits (qps, burst) and a
// counter of the HTTP requests it makes. wrap, if any, wraps the transport
// inside the counter.
func clientset(t *testing.T, cfg *rest.Config, qps float32, burst int, wrap ...func(http.RoundTripper) http.RoundTripper) (*kubernetes.Clientset, *atomic.Int64) {
	t.Helper()
	cfg.QPS, cfg.Burst = qps, burst
	for _, w := range wrap {
		cfg.Wrap(w)
	}
	var n atomic.Int64
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{rt: rt, n: &n}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Idle keep-alive connections would outlive the test and its cluster.
	t.Cleanup(func() { closeIdle(cfg) })
	return cs, &n
}

// runAgent runs a until t ends, then stops it and fails t if Run failed.
func runAgent(t *testing.T, a *agent.Agent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent.Run: %v", err)
		}
	})
}

type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(req)
}

func closeIdle(cfg *rest.Config) {
	if rt, err := rest.TransportFor(cfg); err == nil {
		if ci, ok := rt.(interface{ CloseIdleConnections() }); ok {
			ci.CloseIdleConnections()
		}
	}
}
