package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/examples/internal/exlog"
	"github.com/nodekit/nodekit/examples/internal/nodeflags"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/status"
)

// errUsage is wrapped by errors in the command line.
var errUsage = nodeflags.ErrUsage

// kubeletVersion is what the Node reports as nodeInfo.kubeletVersion: the
// Kubernetes minor nodekit follows (its k8s.io modules are v0.37).
const kubeletVersion = "v1.37.0-nodekit"

type options struct {
	pods                 nodeflags.Pods
	kubeconfig, nodeName string
	nodeIPs              []string
	podsPerCore          int
	labels               map[string]string
	taints               []v1.Taint
	verbosity            int
	duration             time.Duration
	cri                  nodeflags.CRI
	objectCacheTTL       time.Duration
	dns                  nodeflags.DNS
	cgroups              nodeflags.Cgroups
	eviction             nodeflags.Eviction
	serve                nodeflags.Server
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	var nodeIP, labels, taints string
	fs := flag.NewFlagSet("kubenode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: go run ./examples/kubenode -kubeconfig FILE [flags]

A node agent built from nodekit that joins the cluster of -kubeconfig: it
registers the Node, renews its Lease, runs the pods bound to it and reports
their status. SIGINT or SIGTERM stops it, leaving the pods as they are.

Flags:
`)
		fs.PrintDefaults()
	}
	defKubeconfig := os.Getenv("KUBECONFIG")
	if home, err := os.UserHomeDir(); defKubeconfig == "" && err == nil {
		defKubeconfig = filepath.Join(home, ".kube", "config")
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", defKubeconfig, "kubeconfig of the cluster to join (default $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&o.nodeName, "node-name", "", "the Node's name (default the host name)")
	fs.StringVar(&nodeIP, "node-ip", "", "the node's IP, or a dual-stack pair `IP,IP` primary first, reported as InternalIPs (default the host's first global unicast IPv4 address)")
	fs.IntVar(&o.podsPerCore, "pods-per-core", 0, "with a positive value, the pods capacity is at most this many per core (and -max-pods at most)")
	fs.StringVar(&labels, "node-labels", "", "labels `key=value,...` added to the Node at registration")
	fs.StringVar(&taints, "register-with-taints", "", "taints `key=value:Effect,...` the Node is registered with")
	o.pods.AddFlags(fs, "")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity: 0 errors and milestones, 1 and up more detail (logs go to stderr)")
	fs.DurationVar(&o.duration, "duration", 0, "stop by itself after this long, as on SIGINT; 0 runs until signalled")
	o.cri.AddFlags(fs)
	fs.DurationVar(&o.objectCacheTTL, "object-cache-ttl", time.Minute, "with -cri: how long configMaps, secrets and services read for pods are used before they are read again")
	o.dns.AddFlags(fs)
	o.cgroups.AddFlags(fs)
	o.serve.Cluster = true
	o.eviction.AddFlags(fs)
	o.serve.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	var err error
	if o.nodeIPs, err = parseIPs(nodeIP); err != nil {
		return nil, err
	}
	if o.labels, err = parseLabels(labels); err != nil {
		return nil, err
	}
	if o.taints, err = parseTaints(taints); err != nil {
		return nil, err
	}
	return o, o.validate()
}

func (o *options) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...)
	}
	if err := o.pods.Validate(); err != nil {
		return err
	}
	if o.duration < 0 {
		return bad("-duration must not be negative, got %s", o.duration)
	}
	if o.podsPerCore < 0 {
		return bad("-pods-per-core must not be negative, got %d", o.podsPerCore)
	}
	if o.kubeconfig == "" {
		return bad("-kubeconfig is required")
	}
	if o.pods.ManifestPath != "" {
		if _, err := os.Stat(o.pods.ManifestPath); err != nil {
			return bad("-pod-manifest-path: %v", err)
		}
	}
	if err := o.cri.Validate(); err != nil {
		return err
	}
	if err := o.cgroups.Validate(o.cri.Endpoint); err != nil {
		return err
	}
	if err := o.eviction.Validate(); err != nil {
		return err
	}
	// a kubeconfig that cannot be read is reported when it is used
	if ca, err := clusterCA(o.kubeconfig); err == nil {
		o.serve.DefaultClientCAs = ca
	}
	if err := o.serve.Validate(); err != nil {
		return err
	}
	var err error
	o.nodeName, err = nodeflags.NodeName(o.nodeName)
	return err
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseIPs(s string) ([]string, error) {
	ips := splitList(s)
	for _, ip := range ips {
		if net.ParseIP(ip) == nil {
			return nil, fmt.Errorf("%w: -node-ip: %q is not an IP address", errUsage, ip)
		}
	}
	if len(ips) > 2 || len(ips) == 2 && (net.ParseIP(ips[0]).To4() == nil) == (net.ParseIP(ips[1]).To4() == nil) {
		return nil, fmt.Errorf("%w: -node-ip: %q: want one IP or a dual-stack pair (one IPv4, one IPv6)", errUsage, s)
	}
	if len(ips) == 0 {
		if ip := hostIP(); ip != "" {
			ips = []string{ip}
		}
	}
	return ips, nil
}

// hostIP is the host's first global unicast IPv4 address, or "".
func hostIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	return ""
}

func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range splitList(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%w: -node-labels: %q: want key=value", errUsage, kv)
		}
		out[k] = v // node.New validates keys and values
	}
	return out, nil
}

// parseTaints reads the kubelet's --register-with-taints: key=value:Effect
// or key:Effect.
func parseTaints(s string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, t := range splitList(s) {
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("%w: -register-with-taints: %q: want key=value:Effect", errUsage, t)
		}
		switch e := v1.TaintEffect(effect); e {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("%w: -register-with-taints: %q: effect must be NoSchedule, PreferNoSchedule or NoExecute", errUsage, t)
		}
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, v1.Taint{Key: k, Value: v, Effect: v1.TaintEffect(effect)})
	}
	return out, nil
}

// clients loads the kubeconfig and checks that it reaches an apiserver.
func clients(ctx context.Context, path string) (*clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("-kubeconfig %s: %w", path, err)
	}
	cfg.UserAgent = "nodekit-kubenode"
	cfg.QPS, cfg.Burst = 50, 100
	probe := rest.CopyConfig(cfg)
	probe.Timeout = 10 * time.Second
	pcs, err := newClients(probe)
	if err != nil {
		return nil, fmt.Errorf("-kubeconfig %s: %w", path, err)
	}
	if err := pcs.serverVersion(ctx); err != nil {
		return nil, fmt.Errorf("-kubeconfig %s: no apiserver answers at %s: %w", path, cfg.Host, err)
	}
	cs, err := newClients(cfg)
	if err != nil {
		return nil, fmt.Errorf("-kubeconfig %s: %w", path, err)
	}
	return cs, nil
}

// clusterCA returns the CA (PEM) the kubeconfig at path trusts for its
// apiserver, nil if it names none.
func clusterCA(path string) ([]byte, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("-kubeconfig %s: %w", path, err)
	}
	if len(cfg.CAData) > 0 {
		return cfg.CAData, nil
	}
	if cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("-kubeconfig %s: %w", path, err)
		}
		return b, nil
	}
	return nil, nil
}

// run is the program: it parses args, joins the cluster and runs the agent
// until ctx ends (or -duration passes).
func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := exlog.New(stderr, o.verbosity)
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	cs, err := clients(ctx, o.kubeconfig)
	if err != nil {
		return err
	}
	// Events go to the apiserver as the kubelet's do: from component
	// "kubelet" on this host.
	events := record.NewBroadcaster(record.WithContext(ctx))
	defer events.Shutdown()
	events.StartRecordingToSink(eventSink{c: cs, ctx: ctx})
	rec := events.NewRecorder(cs.scheme, v1.EventSource{Component: "kubelet", Host: o.nodeName})
	o.cri.Recorder = rec
	// The runtime is made before the agent, whose Node gives the
	// allocatable resources the downward API falls back on.
	var started atomic.Pointer[agent.Agent]
	reg, probeReg := nodeflags.NewRegistry(), prometheus.NewRegistry()
	rt, closeRuntime, err := newRuntime(ctx, o, cs, reg, rec, allocatableOf(&started), log)
	if err != nil {
		return err
	}
	defer closeRuntime()

	cfg := agent.Config{
		NodeName:     o.nodeName,
		Runtime:      rt,
		PodSource:    cs.Pods(""),
		StatusClient: func(ns string) status.PodClient { return cs.Pods(ns) },
		Secrets:      func(ns string) agent.SecretGetter { return cs.Secrets(ns) },
		NodeIPs:      o.nodeIPs,
		Node: &node.Config{
			Nodes:          cs.Nodes(),
			Leases:         cs.Leases(v1.NamespaceNodeLease),
			Labels:         o.labels,
			Taints:         o.taints,
			KubeletVersion: kubeletVersion,
			KubeletPort:    kubeletPort(o.serve.Port()),
			PodsPerCore:    o.podsPerCore,
		},
		Recorder:        rec,
		Log:             log.WithName("agent"),
		Registerer:      reg,
		ProbeRegisterer: probeReg,
	}
	o.pods.Apply(&cfg)
	// The Node's allocatable is the capacity less these and the hard
	// eviction thresholds (the agent passes those), as the kubelet's.
	cfg.Node.SystemReserved, cfg.Node.KubeReserved = o.cgroups.Reserved()
	st, err := nodeflags.NewStats(o.nodeName, rt, log.WithName("stats"))
	if err != nil {
		return err
	}
	o.eviction.Apply(&cfg, st.Eviction)
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	if cfg.Eviction == nil { // the eviction manager samples otherwise
		sctx, stopStats := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = st.Run(sctx) }()
		defer func() { stopStats(); <-done }()
	}
	o.serve.Stats = st
	started.Store(a)
	o.serve.NodeName, o.serve.NodeIPs = o.nodeName, o.nodeIPs
	o.serve.Tokens, o.serve.Reviews = cs.TokenReviews(), cs.SubjectAccessReviews()
	if o.serve.RotateServerCertificates() && o.serve.Port() != 0 {
		dir, err := o.serve.CertDir()
		if err != nil {
			return err
		}
		sc := &servingCerts{csrs: cs.CertificateSigningRequests(), nodeName: o.nodeName,
			names: o.serve.CertNames(), dir: dir, clock: clock.RealClock{}, log: log.WithName("certificate")}
		o.serve.GetCertificate = sc.GetCertificate
		cctx, stopCerts := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); sc.run(cctx) }()
		defer func() { stopCerts(); <-done }()
	}
	sctx, stopServers := context.WithCancel(ctx)
	wait, err := nodeflags.Serve(sctx, &o.serve, a, rt, reg, probeReg, log.WithName("server"))
	if err != nil {
		stopServers()
		return err
	}
	defer func() { stopServers(); wait() }()
	log.Info("Joining the cluster", "node", o.nodeName, "kubeconfig", o.kubeconfig, "runtime", rt.Type())
	go func() {
		select {
		case <-a.Node().Registered():
			log.Info("Node registered", "node", o.nodeName)
		case <-ctx.Done():
		}
	}()
	err = a.Run(ctx)
	log.Info("Stopped")
	return err
}

// newRuntime returns the runtime o asks for and a function that releases it.
func newRuntime(ctx context.Context, o *options, cs *clientset, reg prometheus.Registerer, rec record.EventRecorder, alloc func() v1.ResourceList, log logr.Logger) (runtime.Runtime, func(), error) {
	if o.cri.Endpoint == "" {
		rt, err := fake.New(fake.Config{Log: log.WithName("fake").V(1), Recorder: rec})
		if err != nil {
			return nil, nil, err
		}
		return rt, func() {}, nil
	}
	metricsOpts, err := cri.MetricsDialOptions(reg)
	if err != nil {
		return nil, nil, err
	}
	env, vols, stopSources, err := podSources(ctx, cs, o, rec, alloc, log)
	if err != nil {
		return nil, nil, err
	}
	m, err := o.cri.Open(ctx, cri.Config{Env: env, Volumes: vols, DialOptions: metricsOpts}, &o.pods, &o.dns, &o.cgroups, o.nodeName, log)
	if err != nil {
		stopSources()
		return nil, nil, err
	}
	stopLogs := nodeflags.RunLogRotation(ctx, m)
	return m, func() { stopLogs(); m.Close(); stopSources() }, nil
}

// kubeletPort is the port the Node reports for -port: none when -port 0
// turns the agent's API off.
func kubeletPort(port int32) int32 {
	if port == 0 {
		return node.NoKubeletPort
	}
	return port
}
