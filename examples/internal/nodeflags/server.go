package nodeflags

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server"
)

// Server are the kubelet's server flags.
type Server struct {
	address, healthzAddress         string
	port, readOnlyPort, healthzPort int
	tlsCertFile, tlsKeyFile         string
}

// AddFlags defines -address, -port, -read-only-port, -healthz-bind-address,
// -healthz-port, -tls-cert-file and -tls-private-key-file on fs.
func (o *Server) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.address, "address", "127.0.0.1", "IP address to serve -port and -read-only-port on; a non-loopback one needs -tls-cert-file, since this agent has no authentication")
	fs.IntVar(&o.port, "port", server.DefaultPort, "port of the agent's API (/healthz, /pods, /runningpods/, /metrics, /containerLogs); 0 disables it")
	fs.IntVar(&o.readOnlyPort, "read-only-port", 0, "port of the read-only API (/healthz, /pods, /metrics), plain HTTP; 0 disables it, as by default in the kubelet's config")
	fs.StringVar(&o.healthzAddress, "healthz-bind-address", "127.0.0.1", "IP address of the healthz endpoint")
	fs.IntVar(&o.healthzPort, "healthz-port", server.DefaultHealthzPort, "port of the healthz endpoint (/healthz only); 0 disables it")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "certificate (with intermediates) served on -port; with -tls-private-key-file")
	fs.StringVar(&o.tlsKeyFile, "tls-private-key-file", "", "private key of -tls-cert-file")
}

// Port is -port: what the Node reports as its kubelet endpoint.
func (o *Server) Port() int32 { return int32(o.port) }

// Validate checks the flags.
func (o *Server) Validate() error {
	for name, p := range map[string]int{"-port": o.port, "-read-only-port": o.readOnlyPort, "-healthz-port": o.healthzPort} {
		if p < 0 || p > 65535 {
			return fmt.Errorf("%w: %s %d is not a port", ErrUsage, name, p)
		}
	}
	for name, a := range map[string]string{"-address": o.address, "-healthz-bind-address": o.healthzAddress} {
		if net.ParseIP(a) == nil {
			return fmt.Errorf("%w: %s %q is not an IP address", ErrUsage, name, a)
		}
	}
	if (o.tlsCertFile == "") != (o.tlsKeyFile == "") {
		return fmt.Errorf("%w: -tls-cert-file and -tls-private-key-file go together", ErrUsage)
	}
	if !net.ParseIP(o.address).IsLoopback() && (o.tlsCertFile == "" || o.readOnlyPort != 0) && (o.port != 0 || o.readOnlyPort != 0) {
		return fmt.Errorf("%w: -address %s is not loopback: serving pods and logs there needs -tls-cert-file and no -read-only-port", ErrUsage, o.address)
	}
	return nil
}

// NewRegistry returns the registry the agent's metrics go on, with the Go
// and process collectors a Prometheus scrape expects.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Serve starts the servers o asks for on a's views; they stop when ctx
// ends, and the returned function waits for that. A port that cannot be
// bound is logged, as the kubelet does, and the agent runs on.
func Serve(ctx context.Context, o *Server, a *agent.Agent, rt runtime.Runtime, reg, probeReg *prometheus.Registry, log logr.Logger) (func(), error) {
	checks := []server.HealthCheck{{Name: "syncloop", Check: a.SyncLoopHealthy}, {Name: "pleg", Check: a.PLEGHealthy}}
	cfg := server.Config{Pods: a, RunningPods: rt, HealthChecks: checks, Metrics: reg, ProbeMetrics: probeReg, Log: log}
	if l, ok := rt.(runtime.ContainerLogs); ok {
		cfg.Logs = l
	}
	// exec, attach and port-forward: proxied to a CRI runtime's streaming
	// server, or served in process (runtime/fake); /run through ExecSync.
	if u, ok := rt.(runtime.StreamURLer); ok {
		cfg.StreamURLs = u
	}
	if cs, ok := rt.(runtime.ContainerStreamer); ok {
		cfg.Streaming = cs
	}
	if pf, ok := rt.(runtime.PortForwarder); ok {
		cfg.PortForward = pf
	}
	if cr, ok := rt.(runtime.CommandRunner); ok {
		cfg.Exec = cr
	}
	var tlsConfig *tls.Config
	if o.tlsCertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCertFile, o.tlsKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: -tls-cert-file: %v", ErrUsage, err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	var wg sync.WaitGroup
	run := func(name, addr string, build func() (*server.Server, error), healthzOnly bool, tc *tls.Config) error {
		var h = server.HealthzHandler(checks...)
		if !healthzOnly {
			s, err := build()
			if err != nil {
				return err
			}
			h = s.Handler()
		}
		log.Info("Serving", "server", name, "address", addr, "tls", tc != nil)
		wg.Go(func() {
			if err := server.ListenAndServe(ctx, addr, h, tc); err != nil {
				log.Error(err, "Server failed", "server", name)
			}
		})
		return nil
	}
	if o.healthzPort != 0 {
		_ = run("healthz", net.JoinHostPort(o.healthzAddress, strconv.Itoa(o.healthzPort)), nil, true, nil)
	}
	if o.port != 0 {
		if err := run("api", net.JoinHostPort(o.address, strconv.Itoa(o.port)), func() (*server.Server, error) { return server.New(cfg) }, false, tlsConfig); err != nil {
			return nil, err
		}
	}
	if o.readOnlyPort != 0 {
		ro := cfg
		ro.ReadOnly = true
		if err := run("read-only", net.JoinHostPort(o.address, strconv.Itoa(o.readOnlyPort)), func() (*server.Server, error) { return server.New(ro) }, false, nil); err != nil {
			return nil, err
		}
	}
	return wg.Wait, nil
}
