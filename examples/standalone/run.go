package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/examples/internal/exlog"
	"github.com/nodekit/nodekit/examples/internal/nodeflags"
	"github.com/nodekit/nodekit/examples/internal/podview"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fake"
)

// errUsage is wrapped by errors in the command line.
var errUsage = nodeflags.ErrUsage

// defaultManifests is the manifest directory shipped in the repository,
// relative to its root.
const defaultManifests = "examples/standalone/manifests"

type options struct {
	manifestPath, manifestURL string
	header                    nodeflags.HeaderFlag
	nodeName                  string
	syncFrequency             time.Duration
	fileCheck, httpCheck      time.Duration
	allowPrivileged           bool
	allowHostNamespaces       bool
	maxPods                   int
	verbosity                 int
	duration                  time.Duration
	criEndpoint, pauseImage   string
	podLogsRoot, podsRoot     string
	dns                       nodeflags.DNS
	cgroups                   nodeflags.Cgroups
	serve                     nodeflags.Server
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{header: nodeflags.HeaderFlag{}}
	fs := flag.NewFlagSet("standalone", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: go run ./examples/standalone [flags]

A node agent built from nodekit that runs static pods without an apiserver
and prints a table of pods, phases and containers whenever it changes.
SIGINT or SIGTERM stops every pod gracefully, then it exits 0.

It serves the kubelet's endpoints: /healthz on 127.0.0.1:10248, and /healthz,
/pods, /runningpods/, /metrics (the kubelet's metric names) and
/containerLogs on 127.0.0.1:10250.

Without -cri the pods run on the built-in in-memory runtime, which runs no
commands: containers run until stopped, init containers exit 0 after 1s, and
a pod annotation fake.nodekit.io/exit: "name=duration[:code],..." makes the
named containers exit that long after they start (code default 0).

Flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.manifestPath, "pod-manifest-path", defaultManifests, "directory (or file) of static pod manifests, re-read on change; empty for none")
	fs.StringVar(&o.manifestURL, "manifest-url", "", "URL serving static pod manifests, polled every -http-check-frequency")
	fs.Var(o.header, "manifest-url-header", "HTTP header `key:value` sent to -manifest-url; repeatable, or comma-separated")
	fs.StringVar(&o.nodeName, "node-name", "", "node name, appended to static pod names (default the host name)")
	fs.DurationVar(&o.syncFrequency, "sync-frequency", time.Minute, "how often every pod is synced again without a change")
	fs.DurationVar(&o.fileCheck, "file-check-frequency", 20*time.Second, "how often -pod-manifest-path is re-read besides file notifications")
	fs.DurationVar(&o.httpCheck, "http-check-frequency", 20*time.Second, "how often -manifest-url is polled")
	fs.BoolVar(&o.allowPrivileged, "allow-privileged", true, "admit pods with privileged containers; false rejects them")
	fs.BoolVar(&o.allowHostNamespaces, "allow-host-namespaces", true, "admit pods using the host's network, PID or IPC namespace; false rejects them")
	fs.IntVar(&o.maxPods, "max-pods", 110, "how many pods may run; later ones are rejected with reason OutOfpods")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity: 0 errors and milestones, 1 and up more detail (logs go to stderr)")
	fs.DurationVar(&o.duration, "duration", 0, "stop by itself after this long, as on SIGINT; 0 runs until signalled")
	fs.StringVar(&o.criEndpoint, "cri", "", "CRI runtime endpoint, e.g. unix:///run/containerd/containerd.sock; empty for the in-memory runtime. Images must be on the node or pullable")
	fs.StringVar(&o.pauseImage, "pause-image", "", "with -cri: the sandbox image the runtime is configured with (containerd's sandbox_image); pulled at start if missing. The CRI runtime, not the agent, chooses it")
	fs.StringVar(&o.podLogsRoot, "pod-logs-root", "/var/log/pods", "with -cri: root of the container log directories")
	fs.StringVar(&o.podsRoot, "pods-root", "/var/lib/nodekit/pods", "with -cri: per-pod state (emptyDir volumes, termination messages)")
	o.dns.AddFlags(fs)
	o.cgroups.AddFlags(fs)
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
	return o, o.validate()
}

func (o *options) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...)
	}
	for name, d := range map[string]time.Duration{"-sync-frequency": o.syncFrequency, "-file-check-frequency": o.fileCheck,
		"-http-check-frequency": o.httpCheck} {
		if d <= 0 {
			return bad("%s must be positive, got %s", name, d)
		}
	}
	if o.duration < 0 {
		return bad("-duration must not be negative, got %s", o.duration)
	}
	if o.maxPods <= 0 {
		return bad("-max-pods must be positive, got %d", o.maxPods)
	}
	if o.manifestPath == "" && o.manifestURL == "" {
		return bad("nothing to run: give -pod-manifest-path or -manifest-url")
	}
	if o.manifestPath != "" {
		if _, err := os.Stat(o.manifestPath); err != nil {
			if o.manifestPath == defaultManifests {
				return bad("no manifests at %s: run from the repository root or give -pod-manifest-path", defaultManifests)
			}
			return bad("-pod-manifest-path: %v", err)
		}
	}
	if len(o.header) > 0 && o.manifestURL == "" {
		return bad("-manifest-url-header needs -manifest-url")
	}
	if err := o.cgroups.Validate(o.criEndpoint); err != nil {
		return err
	}
	if err := o.serve.Validate(); err != nil {
		return err
	}
	if o.pauseImage != "" && o.criEndpoint == "" {
		return bad("-pause-image needs -cri")
	}
	if o.nodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("node name: %w; give -node-name", err)
		}
		o.nodeName = strings.ToLower(host)
	}
	if errs := validation.IsDNS1123Subdomain(o.nodeName); len(errs) > 0 {
		return bad("-node-name %q: %s", o.nodeName, strings.Join(errs, "; "))
	}
	return nil
}

// run is the program: it parses args, runs the agent until ctx ends (or
// -duration passes), then stops the pods and returns.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
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
	reg, probeReg := nodeflags.NewRegistry(), prometheus.NewRegistry()
	rt, closeRuntime, err := newRuntime(ctx, o, reg, log)
	if err != nil {
		return err
	}
	defer closeRuntime()

	var header http.Header
	if len(o.header) > 0 {
		header = http.Header(o.header)
	}
	a, err := agent.New(agent.Config{
		NodeName:           o.nodeName,
		Runtime:            rt,
		StaticPodPath:      o.manifestPath,
		FileCheckFrequency: o.fileCheck,
		ManifestURL:        o.manifestURL,
		ManifestURLHeader:  header,
		HTTPCheckFrequency: o.httpCheck,
		SyncFrequency:      o.syncFrequency,
		MaxPods:            o.maxPods,
		DenyPrivileged:     !o.allowPrivileged,
		DenyHostNamespaces: !o.allowHostNamespaces,
		TerminateOnExit:    true,
		Log:                log.WithName("agent"),
		Registerer:         reg,
		ProbeRegisterer:    probeReg,
	})
	if err != nil {
		return err
	}
	sctx, stopServers := context.WithCancel(ctx)
	wait, err := nodeflags.Serve(sctx, &o.serve, a, rt, reg, probeReg, log.WithName("server"))
	if err != nil {
		stopServers()
		return err
	}
	defer func() { stopServers(); wait() }()
	view, err := podview.New(podview.Config{Out: stdout, Pods: a.Pods})
	if err != nil {
		return err
	}
	log.Info("Starting", "node", o.nodeName, "runtime", rt.Type(), "manifests", o.manifestPath, "url", o.manifestURL)
	defer log.Info("Stopped")
	return view.Follow(func() error { return a.Run(ctx) })
}

// newRuntime returns the runtime o asks for and a function that releases it.
func newRuntime(ctx context.Context, o *options, reg prometheus.Registerer, log logr.Logger) (runtime.Runtime, func(), error) {
	if o.criEndpoint == "" {
		rt, err := fake.New(fake.Config{Log: log.WithName("fake").V(1)})
		if err != nil {
			return nil, nil, err
		}
		return newScripted(rt, clock.RealClock{}), func() {}, nil
	}
	dnsc, err := o.dns.Configurer(o.nodeName, log)
	if err != nil {
		return nil, nil, err
	}
	metricsOpts, err := cri.MetricsDialOptions(reg)
	if err != nil {
		return nil, nil, err
	}
	m, err := cri.New(ctx, cri.Config{
		DialOptions:    metricsOpts,
		DNS:            dnsc,
		Endpoint:       o.criEndpoint,
		PodLogsRoot:    o.podLogsRoot,
		PodsRoot:       o.podsRoot,
		DenyPrivileged: !o.allowPrivileged,
		Log:            log.WithName("cri"),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("-cri %s: %w", o.criEndpoint, err)
	}
	if err := o.cgroups.Setup(ctx, m, o.nodeName, log); err != nil {
		m.Close()
		return nil, nil, err
	}
	if o.pauseImage != "" {
		if err := nodeflags.EnsureImage(ctx, m, o.pauseImage); err != nil {
			m.Close()
			return nil, nil, fmt.Errorf("-pause-image: %w", err)
		}
	}
	return m, func() { m.Close() }, nil
}
