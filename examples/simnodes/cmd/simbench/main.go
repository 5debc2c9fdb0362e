// Command simbench measures a simulator of nodes on a running control
// plane (etcd, kube-apiserver with an audit log, kube-scheduler,
// kube-controller-manager): simnodes (this module's command) or kwok. It
// starts the simulator, times the nodes to Ready and a Deployment of
// -pods-per-node pods per node to Running, counts the simulator's
// apiserver requests by verb from the audit log at rest and during the
// rollout, reads its CPU time and peak RSS from /proc, checks behaviour
// kwok does not simulate (probes, restart back-off, graceful
// termination), then kills a shard (or the simulator) and times its
// Nodes to NotReady and, with -shards > 1, its pods to eviction. It
// writes one JSON result; -report turns results into the table of
// docs/performance.md. bench/simnodes.sh runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "simbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("simbench", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "admin kubeconfig of the cluster")
	fs.StringVar(&o.impl, "impl", "nodekit", "simulator: nodekit or kwok")
	fs.IntVar(&o.nodes, "nodes", 100, "nodes")
	fs.IntVar(&o.shards, "shards", 1, "simnodes processes (nodekit only)")
	fs.IntVar(&o.podsPerNode, "pods-per-node", 10, "Deployment replicas per node")
	fs.StringVar(&o.simnodes, "simnodes", "", "simnodes binary")
	fs.StringVar(&o.simnodesArgs, "simnodes-args", "", "more flags for every simnodes process, space-separated (e.g. \"-pprof-addr 127.0.0.1:0 -gc-percent 50\")")
	fs.StringVar(&o.kwok, "kwok", "", "kwok binary")
	fs.StringVar(&o.kwokConfig, "kwok-config", "", "kwok's stages (its --config)")
	fs.StringVar(&o.audit, "audit", "", "the apiserver's audit log (JSON lines)")
	fs.StringVar(&o.apiserverPID, "apiserver-pid", "", "file with the apiserver's pid, for its CPU and RSS")
	fs.StringVar(&o.workdir, "workdir", ".", "where the simulators' logs go")
	fs.StringVar(&o.out, "out", "", "result file (JSON)")
	fs.DurationVar(&o.rest, "rest", 60e9, "length of each at-rest window")
	fs.DurationVar(&o.settle, "settle", 20e9, "wait after the nodes are Ready and after the pods run, before each window at rest")
	fs.BoolVar(&o.correctness, "correctness", true, "run the behaviour checks")
	fs.BoolVar(&o.kill, "kill", true, "kill a shard (or the simulator) at the end and time NotReady and eviction")
	fs.StringVar(&o.load, "load", "", "the machine's load, recorded with the result")
	report := fs.String("report", "", "instead: write the table of these result files (comma-separated glob) into -doc")
	doc := fs.String("doc", "docs/performance.md", "with -report: the doc to write the table into")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *report != "" {
		return writeReport(*report, *doc)
	}
	return bench(ctx, &o)
}
