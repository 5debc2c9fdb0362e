package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server/streaming"
)

// ErrInvalidConfig is wrapped by New when the Config is unusable.
var ErrInvalidConfig = errors.New("server: invalid config")

// DefaultHealthzPort is the kubelet's healthz port; DefaultPort and
// DefaultReadOnlyPort its main and read-only ones.
const (
	DefaultHealthzPort  = 10248
	DefaultPort         = 10250
	DefaultReadOnlyPort = 10255
)

// PodLister lists the pods the agent runs, with their latest statuses;
// *agent.Agent satisfies it.
type PodLister interface {
	Pods() []*v1.Pod
}

// RuntimePodLister lists what the runtime runs; runtime.Runtime satisfies
// it.
type RuntimePodLister interface {
	GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error)
}

// HealthCheck is one named check of /healthz; Check returns nil when
// healthy. It has the shape of node.HealthCheck, so the same funcs serve
// both.
type HealthCheck struct {
	Name  string
	Check func() error
}

// Config configures a Server. Pods is required; every other part turns
// its endpoint on when set.
type Config struct {
	// Pods serves /pods. Required.
	Pods PodLister
	// RunningPods serves /runningpods/ (not in ReadOnly mode).
	RunningPods RuntimePodLister
	// HealthChecks run on /healthz after "ping", each also on
	// /healthz/<name>.
	HealthChecks []HealthCheck
	// Metrics serves /metrics, for example the prometheus.Registry the
	// agent's Config.Registerer registered on.
	Metrics prometheus.Gatherer
	// ProbeMetrics serves /metrics/probes, the prober's metrics, for example
	// the registry the agent's Config.ProbeRegisterer registered on.
	ProbeMetrics prometheus.Gatherer
	// Logs serves /containerLogs/{namespace}/{pod}/{container} (not in
	// ReadOnly mode); a runtime that implements runtime.ContainerLogs fits.
	Logs runtime.ContainerLogs
	// Streaming serves /exec and /attach in process, for runtimes that run
	// sessions themselves (runtime/fake, a provider); PortForward serves
	// /portForward likewise. Not in ReadOnly mode; they need RunningPods to
	// find the container or sandbox.
	Streaming   runtime.ContainerStreamer
	PortForward runtime.PortForwarder
	// StreamURLs serves /exec, /attach and /portForward for a runtime with
	// a streaming server of its own (runtime/cri): the client's upgraded
	// connection is proxied to the URL it returns. It takes precedence over
	// Streaming and PortForward. Needs RunningPods.
	StreamURLs runtime.StreamURLer
	// Exec serves POST /run (the command's output), through ExecSync.
	// Needs RunningPods.
	Exec runtime.CommandRunner
	// StreamIdleTimeout closes an in-process exec, attach or port-forward
	// connection idle this long; default streaming.DefaultIdleTimeout (4h,
	// the kubelet's streamingConnectionIdleTimeout).
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout is how long a SPDY client has to create its
	// streams; default 30s, as the kubelet's.
	StreamCreationTimeout time.Duration
	// Stats serves /stats/summary; *stats.Provider fits (package stats).
	Stats StatsProvider
	// ResourceMetrics serves /metrics/resource; *stats.Provider fits.
	ResourceMetrics ResourceMetricsProvider
	// ReadOnly serves only /healthz, /pods, /stats/summary, /metrics,
	// /metrics/probes and /metrics/resource, as the kubelet's read-only
	// port.
	ReadOnly bool
	// Auth, if set, authenticates and authorizes every request, as the
	// kubelet's webhook authentication and authorization do. nil: every
	// request is served, which is only safe on loopback.
	Auth *Auth
	// Clock gives sinceSeconds its now and times StreamCreationTimeout.
	// Default the real clock.
	Clock clock.Clock
	// Log receives request errors. Default logr.Discard().
	Log logr.Logger
}

// Server is the kubelet's HTTP API over nodekit's parts. Its Handler serves
// it; ListenAndServe runs it on an address.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	log     logr.Logger
	streams *streaming.Server
}

// New checks c and builds the handler.
func New(c Config) (*Server, error) {
	if c.Pods == nil {
		return nil, fmt.Errorf("%w: Pods is required", ErrInvalidConfig)
	}
	if c.Auth != nil && (c.Auth.Authenticator == nil || c.Auth.Authorizer == nil) {
		return nil, fmt.Errorf("%w: Auth needs an Authenticator and an Authorizer", ErrInvalidConfig)
	}
	for _, h := range c.HealthChecks {
		if h.Name == "" || h.Name == "ping" || h.Check == nil {
			return nil, fmt.Errorf("%w: health check %q: a name other than ping and a Check are required", ErrInvalidConfig, h.Name)
		}
	}
	if c.RunningPods == nil && (c.Streaming != nil || c.PortForward != nil || c.StreamURLs != nil || c.Exec != nil) {
		return nil, fmt.Errorf("%w: Streaming, PortForward, StreamURLs and Exec need RunningPods", ErrInvalidConfig)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	s := &Server{cfg: c, mux: http.NewServeMux(), log: c.Log}
	s.streams = streaming.New(streaming.Config{
		IdleTimeout: c.StreamIdleTimeout, CreationTimeout: c.StreamCreationTimeout, Clock: c.Clock, Log: c.Log,
	})
	installHealthz(s.mux, c.HealthChecks)
	s.mux.HandleFunc("GET /pods", s.getPods)
	s.mux.HandleFunc("GET /pods/", s.getPods)
	if c.Metrics != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(c.Metrics, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	}
	if c.ProbeMetrics != nil {
		s.mux.Handle("GET /metrics/probes", promhttp.HandlerFor(c.ProbeMetrics, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	}
	if c.Stats != nil {
		s.mux.HandleFunc("GET /stats/summary", s.getStatsSummary)
		s.mux.HandleFunc("POST /stats/summary", s.getStatsSummary)
	}
	if c.ResourceMetrics != nil {
		s.mux.Handle("GET /metrics/resource", s.resourceMetrics())
	}
	if !c.ReadOnly {
		if c.RunningPods != nil {
			s.mux.HandleFunc("GET /runningpods/", s.getRunningPods)
		}
		if c.Logs != nil {
			s.mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.getContainerLogs)
		}
		s.installStreaming()
	}
	return s, nil
}

// Handler returns the server's handler, behind Auth if configured.
func (s *Server) Handler() http.Handler {
	if s.cfg.Auth != nil {
		return s.cfg.Auth.filter(s.mux, s.log)
	}
	return s.mux
}

// HealthzHandler serves only /healthz with checks, for the kubelet's
// separate healthz port (10248), which has no authentication.
func HealthzHandler(checks ...HealthCheck) http.Handler {
	mux := http.NewServeMux()
	installHealthz(mux, checks)
	return mux
}

// shutdownTimeout bounds how long Serve waits for requests in flight once
// its context ends.
const shutdownTimeout = 5 * time.Second

// ListenAndServe serves h on addr (TLS if tlsConfig is set) until ctx
// ends, then shuts the server down and returns nil once every request has
// ended, or closes the connections still open after 5 seconds. Requests
// get contexts derived from ctx, so a followed log stream ends with it.
func ListenAndServe(ctx context.Context, addr string, h http.Handler, tlsConfig *tls.Config) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return Serve(ctx, l, h, tlsConfig)
}

// Serve is ListenAndServe on a listener it takes over.
func Serve(ctx context.Context, l net.Listener, h http.Handler, tlsConfig *tls.Config) error {
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("server: shutdown: %w", err)
	}
	return nil
}
