package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
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
	pods      nodeflags.Pods
	nodeName  string
	verbosity int
	duration  time.Duration
	cri       nodeflags.CRI
	dns       nodeflags.DNS
	cgroups   nodeflags.Cgroups
	serve     nodeflags.Server
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
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
	o.pods.AddFlags(fs, defaultManifests)
	fs.StringVar(&o.nodeName, "node-name", "", "node name, appended to static pod names (default the host name)")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity: 0 errors and milestones, 1 and up more detail (logs go to stderr)")
	fs.DurationVar(&o.duration, "duration", 0, "stop by itself after this long, as on SIGINT; 0 runs until signalled")
	o.cri.AddFlags(fs)
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
	if err := o.pods.Validate(); err != nil {
		return err
	}
	if o.duration < 0 {
		return bad("-duration must not be negative, got %s", o.duration)
	}
	if o.pods.ManifestPath == "" && o.pods.ManifestURL == "" {
		return bad("nothing to run: give -pod-manifest-path or -manifest-url")
	}
	if o.pods.ManifestPath != "" {
		if _, err := os.Stat(o.pods.ManifestPath); err != nil {
			if o.pods.ManifestPath == defaultManifests {
				return bad("no manifests at %s: run from the repository root or give -pod-manifest-path", defaultManifests)
			}
			return bad("-pod-manifest-path: %v", err)
		}
	}
	if err := o.cgroups.Validate(o.cri.Endpoint); err != nil {
		return err
	}
	if err := o.serve.Validate(); err != nil {
		return err
	}
	if err := o.cri.Validate(); err != nil {
		return err
	}
	var err error
	o.nodeName, err = nodeflags.NodeName(o.nodeName)
	return err
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

	cfg := agent.Config{
		NodeName:        o.nodeName,
		Runtime:         rt,
		TerminateOnExit: true,
		Log:             log.WithName("agent"),
		Registerer:      reg,
		ProbeRegisterer: probeReg,
	}
	o.pods.Apply(&cfg)
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	st, err := nodeflags.NewStats(o.nodeName, rt, log.WithName("stats"))
	if err != nil {
		return err
	}
	stctx, stopStats := context.WithCancel(ctx)
	stDone := make(chan struct{})
	go func() { defer close(stDone); _ = st.Run(stctx) }()
	defer func() { stopStats(); <-stDone }()
	o.serve.NodeName, o.serve.Stats = o.nodeName, st
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
	log.Info("Starting", "node", o.nodeName, "runtime", rt.Type(), "manifests", o.pods.ManifestPath, "url", o.pods.ManifestURL)
	defer log.Info("Stopped")
	return view.Follow(func() error { return a.Run(ctx) })
}

// newRuntime returns the runtime o asks for and a function that releases it.
func newRuntime(ctx context.Context, o *options, reg prometheus.Registerer, log logr.Logger) (runtime.Runtime, func(), error) {
	if o.cri.Endpoint == "" {
		rt, err := fake.New(fake.Config{Log: log.WithName("fake").V(1)})
		if err != nil {
			return nil, nil, err
		}
		return newScripted(rt, clock.RealClock{}), func() {}, nil
	}
	metricsOpts, err := cri.MetricsDialOptions(reg)
	if err != nil {
		return nil, nil, err
	}
	m, err := o.cri.Open(ctx, cri.Config{DialOptions: metricsOpts}, &o.pods, &o.dns, &o.cgroups, o.nodeName, log)
	if err != nil {
		return nil, nil, err
	}
	stopLogs := nodeflags.RunLogRotation(ctx, m)
	return m, func() { stopLogs(); m.Close() }, nil
}
