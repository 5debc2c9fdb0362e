package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/examples/internal/exlog"
	"github.com/nodekit/nodekit/examples/internal/podview"
	"github.com/nodekit/nodekit/examples/provider/procruntime"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(2)
	}
}

// run is the program: it parses args, runs the node until ctx ends (or
// -duration passes), then stops every process and returns.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: go run ./examples/provider -pod-manifest-path DIR [flags]

A node whose static pods run as local processes: each container's command
runs from the host's PATH (images are ignored). Prints a table of pods,
phases and containers whenever it changes. SIGINT or SIGTERM stops the
processes gracefully, then it exits 0.

Flags:
`)
		fs.PrintDefaults()
	}
	manifests := fs.String("pod-manifest-path", "", "directory (or file) of static pod manifests (required unless -manifest-url)")
	manifestURL := fs.String("manifest-url", "", "URL serving static pod manifests")
	nodeName := fs.String("node-name", "provider", "node name, appended to static pod names")
	logRoot := fs.String("log-root", "", "where container output goes (default a temporary directory, removed on exit)")
	duration := fs.Duration("duration", 0, "stop by itself after this long, as on SIGINT; 0 runs until signalled")
	verbosity := fs.Int("v", 0, "log verbosity (logs go to stderr)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case *manifests == "" && *manifestURL == "":
		return errors.New("nothing to run: give -pod-manifest-path or -manifest-url")
	case *duration < 0:
		return fmt.Errorf("-duration must not be negative, got %s", *duration)
	}
	if *logRoot == "" {
		dir, err := os.MkdirTemp("", "nodekit-provider-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*logRoot = dir
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	logger := exlog.New(stderr, *verbosity)

	rt, err := procruntime.New(procruntime.Config{Root: *logRoot, Log: logger.WithName("procruntime")})
	if err != nil {
		return err
	}
	defer rt.Close()
	a, err := agent.New(agent.Config{
		NodeName:        strings.ToLower(*nodeName),
		Runtime:         rt,
		StaticPodPath:   *manifests,
		ManifestURL:     *manifestURL,
		TerminateOnExit: true,
		ShutdownTimeout: 30 * time.Second,
		Log:             logger.WithName("agent"),
	})
	if err != nil {
		return err
	}
	view, err := podview.New(podview.Config{Out: stdout, Pods: a.Pods})
	if err != nil {
		return err
	}
	logger.Info("Starting", "node", *nodeName, "logs", *logRoot)
	return view.Follow(func() error { return a.Run(ctx) })
}
