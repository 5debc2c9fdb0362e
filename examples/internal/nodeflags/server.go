package nodeflags

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server"
)

// The kubelet's --authorization-mode values.
const (
	AuthzAlwaysAllow = "AlwaysAllow"
	AuthzWebhook     = "Webhook"
)

// Server are the kubelet's server, authentication and authorization flags.
// A program that joins a cluster sets Cluster before AddFlags, and the
// node's name, addresses and the apiserver's review clients before Serve.
type Server struct {
	// Cluster gives the defaults of a kubelet joining a kubeadm cluster:
	// -address 0.0.0.0, TLS always (a self-signed certificate without
	// -tls-cert-file), -anonymous-auth=false,
	// -authentication-token-webhook and -authorization-mode Webhook.
	// Without it (no apiserver) the defaults are loopback, plain HTTP,
	// anonymous and AlwaysAllow, and the webhooks cannot be asked for.
	Cluster bool
	// NodeName names the nodes resource requests are authorized on, and
	// the self-signed certificate.
	NodeName string
	// NodeIPs go into the self-signed certificate.
	NodeIPs []string
	// DefaultClientCAs (PEM) stand for -client-ca-file when it is not
	// given: kubenode's are its kubeconfig's cluster CA, which in a
	// kubeadm cluster signs the apiserver's client certificate to the
	// kubelets, as the kubelet's clientCAFile there.
	DefaultClientCAs []byte
	// Tokens and Reviews are the apiserver's TokenReviews and
	// SubjectAccessReviews, for the webhooks (Cluster only).
	Tokens  server.TokenReviewer
	Reviews server.SubjectAccessReviewer
	// Stats, if set, serves /stats/summary and /metrics/resource.
	Stats *Stats
	// GetCertificate, if set, gives -port its serving certificate (the
	// program's -rotate-server-certificates).
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Clock times the webhook caches and the certificate's validity.
	// Default the real clock.
	Clock clock.Clock

	address, healthzAddress         string
	port, readOnlyPort, healthzPort int
	tlsCertFile, tlsKeyFile         string
	certDir                         string
	clientCAFile                    string
	anonymous, tokenWebhook         bool
	tokenTTL                        time.Duration
	authzMode                       string
	authzAllowTTL, authzDenyTTL     time.Duration
	rotateServerCerts               bool

	clientCAs *x509.CertPool // read by Validate
}

// AddFlags defines -address, -port, -read-only-port, -healthz-bind-address,
// -healthz-port, -tls-cert-file, -tls-private-key-file, -cert-dir,
// -client-ca-file, -anonymous-auth, -authentication-token-webhook(-cache-ttl),
// -authorization-mode and -authorization-webhook-cache-(un)authorized-ttl
// on fs, with Cluster's defaults.
func (o *Server) AddFlags(fs *flag.FlagSet) {
	addr, mode := "127.0.0.1", AuthzAlwaysAllow
	if o.Cluster {
		addr, mode = "0.0.0.0", AuthzWebhook
	}
	fs.StringVar(&o.address, "address", addr, "IP address to serve -port and -read-only-port on; a non-loopback one needs authentication (-anonymous-auth=false or -authorization-mode Webhook) and no -read-only-port")
	fs.IntVar(&o.port, "port", server.DefaultPort, "port of the agent's API (/healthz, /pods, /runningpods/, /stats/summary, /metrics, /metrics/resource, /containerLogs, /exec, /attach, /portForward, /run); 0 disables it")
	fs.IntVar(&o.readOnlyPort, "read-only-port", 0, "port of the read-only API (/healthz, /pods, /stats/summary, /metrics, /metrics/resource), plain HTTP without authentication; 0 disables it, as by default in the kubelet's config")
	fs.StringVar(&o.healthzAddress, "healthz-bind-address", "127.0.0.1", "IP address of the healthz endpoint")
	fs.IntVar(&o.healthzPort, "healthz-port", server.DefaultHealthzPort, "port of the healthz endpoint (/healthz only); 0 disables it")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "certificate (with intermediates) served on -port; with -tls-private-key-file. Without it, -port serves TLS with a self-signed certificate from -cert-dir when joining a cluster, with -client-ca-file, or on a non-loopback -address (else plain HTTP)")
	fs.StringVar(&o.tlsKeyFile, "tls-private-key-file", "", "private key of -tls-cert-file")
	fs.StringVar(&o.certDir, "cert-dir", "", "directory of the self-signed serving certificate (kubelet.crt, kubelet.key), made for the node's name, host name and IPs and reused while valid for them (default <user cache dir>/nodekit/<node name>/pki)")
	caDefault := ""
	if o.Cluster {
		caDefault = " (default the kubeconfig's cluster CA, as kubeadm's kubelet)"
	}
	if o.Cluster {
		fs.BoolVar(&o.rotateServerCerts, "rotate-server-certificates", false, "ask the apiserver for the serving certificate with a CertificateSigningRequest for signer kubernetes.io/kubelet-serving (which something must approve and sign) and ask again as it nears expiry, as the kubelet's serverTLSBootstrap; kept in -cert-dir as kubelet-server-current.pem. Until one is issued, TLS handshakes fail")
	}
	fs.StringVar(&o.clientCAFile, "client-ca-file", "", "CA bundle that signs client certificates: a request with a certificate it verifies is the user of the certificate's CN, in the groups of its O"+caDefault)
	fs.BoolVar(&o.anonymous, "anonymous-auth", !o.Cluster, "serve requests without credentials as system:anonymous (group system:unauthenticated); off, they get 401")
	fs.BoolVar(&o.tokenWebhook, "authentication-token-webhook", o.Cluster, "authenticate bearer tokens with the apiserver's TokenReview (needs an apiserver)")
	fs.DurationVar(&o.tokenTTL, "authentication-token-webhook-cache-ttl", server.DefaultTokenCacheTTL, "how long a token's review is kept")
	fs.StringVar(&o.authzMode, "authorization-mode", mode, "AlwaysAllow, or Webhook: authorize each request with the apiserver's SubjectAccessReview of get/create nodes/<subresource> (needs an apiserver)")
	fs.DurationVar(&o.authzAllowTTL, "authorization-webhook-cache-authorized-ttl", server.DefaultAuthorizedCacheTTL, "how long an allowed review is kept")
	fs.DurationVar(&o.authzDenyTTL, "authorization-webhook-cache-unauthorized-ttl", server.DefaultUnauthorizedCacheTTL, "how long a refused review is kept")
}

// Port is -port: what the Node reports as its kubelet endpoint.
func (o *Server) Port() int32 { return int32(o.port) }

// Validate checks the flags and reads -client-ca-file.
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
	if o.rotateServerCerts && o.tlsCertFile != "" {
		return fmt.Errorf("%w: -rotate-server-certificates and -tls-cert-file: give one", ErrUsage)
	}
	switch o.authzMode {
	case AuthzAlwaysAllow, AuthzWebhook:
	default:
		return fmt.Errorf("%w: -authorization-mode %q: want AlwaysAllow or Webhook", ErrUsage, o.authzMode)
	}
	if !o.Cluster && (o.authzMode == AuthzWebhook || o.tokenWebhook) {
		return fmt.Errorf("%w: -authorization-mode Webhook and -authentication-token-webhook need an apiserver, which this agent has none of", ErrUsage)
	}
	for name, d := range map[string]time.Duration{"-authentication-token-webhook-cache-ttl": o.tokenTTL,
		"-authorization-webhook-cache-authorized-ttl": o.authzAllowTTL, "-authorization-webhook-cache-unauthorized-ttl": o.authzDenyTTL} {
		if d < 0 {
			return fmt.Errorf("%w: %s %s is negative", ErrUsage, name, d)
		}
	}
	o.clientCAs = nil
	if o.clientCAFile == "" && len(o.DefaultClientCAs) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(o.DefaultClientCAs) {
			return fmt.Errorf("%w: the default client CA (the kubeconfig's): no PEM certificate in it; give -client-ca-file", ErrUsage)
		}
		o.clientCAs = pool
	}
	if o.clientCAFile != "" {
		b, err := os.ReadFile(o.clientCAFile)
		if err != nil {
			return fmt.Errorf("%w: -client-ca-file: %v", ErrUsage, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("%w: -client-ca-file %s: no PEM certificate in it", ErrUsage, o.clientCAFile)
		}
		o.clientCAs = pool
	}
	if !o.anonymous && o.clientCAs == nil && !o.tokenWebhook {
		return fmt.Errorf("%w: -anonymous-auth=false leaves no way to authenticate: give -client-ca-file or -authentication-token-webhook", ErrUsage)
	}
	open := o.anonymous && o.authzMode == AuthzAlwaysAllow
	if !net.ParseIP(o.address).IsLoopback() && (open || o.readOnlyPort != 0) && (o.port != 0 || o.readOnlyPort != 0) {
		return fmt.Errorf("%w: -address %s is not loopback: serving pods and logs there needs authentication (-anonymous-auth=false, or -authorization-mode Webhook) and no -read-only-port", ErrUsage, o.address)
	}
	return nil
}

// RotateServerCertificates is -rotate-server-certificates.
func (o *Server) RotateServerCertificates() bool { return o.rotateServerCerts }

// CertDir is -cert-dir, or its default for the node.
func (o *Server) CertDir() (string, error) {
	if o.certDir != "" {
		return o.certDir, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("-cert-dir: %w", err)
	}
	return filepath.Join(cache, "nodekit", o.NodeName, "pki"), nil
}

// tlsOn says whether -port serves TLS.
func (o *Server) tlsOn() bool {
	return o.tlsCertFile != "" || o.Cluster || o.clientCAs != nil || !net.ParseIP(o.address).IsLoopback()
}

// NewRegistry returns the registry the agent's metrics go on, with the Go
// and process collectors a Prometheus scrape expects.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// auth is the kubelet's authentication and authorization the flags ask for.
func (o *Server) auth() (*server.Auth, error) {
	c := o.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	ac := server.AuthnConfig{ClientCAs: o.clientCAs, Anonymous: o.anonymous, CacheTTL: o.tokenTTL, Clock: c}
	if o.tokenWebhook {
		if o.Tokens == nil {
			return nil, errors.New("-authentication-token-webhook: no TokenReview client")
		}
		ac.Tokens = o.Tokens
	}
	authn, err := server.NewAuthenticator(ac)
	if err != nil {
		return nil, err
	}
	var authz server.Authorizer = server.AlwaysAllow{}
	if o.authzMode == AuthzWebhook {
		if authz, err = server.NewWebhookAuthorizer(server.AuthzConfig{Reviews: o.Reviews,
			AuthorizedTTL: o.authzAllowTTL, UnauthorizedTTL: o.authzDenyTTL, Clock: c}); err != nil {
			return nil, err
		}
	}
	return &server.Auth{Authenticator: authn, Authorizer: authz, NodeName: o.NodeName}, nil
}

// servingTLS is the TLS configuration of -port, nil for plain HTTP.
func (o *Server) servingTLS(log logr.Logger) (*tls.Config, error) {
	if !o.tlsOn() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.clientCAs != nil {
		// as the kubelet: ask for a certificate and let the authenticator
		// verify it, so that a bad one is a 401, not a failed handshake
		tc.ClientCAs, tc.ClientAuth = o.clientCAs, tls.RequestClientCert
	}
	switch {
	case o.GetCertificate != nil:
		tc.GetCertificate = o.GetCertificate
	case o.tlsCertFile != "":
		cert, err := tls.LoadX509KeyPair(o.tlsCertFile, o.tlsKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: -tls-cert-file: %v", ErrUsage, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	default:
		dir, err := o.CertDir()
		if err != nil {
			return nil, err
		}
		now := time.Now
		if o.Clock != nil {
			now = o.Clock.Now
		}
		cert, made, err := SelfSignedCert(dir, o.CertNames(), now())
		if err != nil {
			return nil, fmt.Errorf("-cert-dir: %w", err)
		}
		log.Info("Using a self-signed serving certificate", "dir", dir, "new", made)
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// CertNames are the DNS names and IPs the self-signed certificate is for:
// the node's name, the host's name and the node's IPs, and -address if it
// is one address.
func (o *Server) CertNames() CertNames {
	var n CertNames
	if o.NodeName != "" {
		n.DNS = append(n.DNS, o.NodeName)
	}
	if h, err := os.Hostname(); err == nil && h != o.NodeName {
		n.DNS = append(n.DNS, h)
	}
	for _, ip := range o.NodeIPs {
		if p := net.ParseIP(ip); p != nil {
			n.IPs = append(n.IPs, p)
		}
	}
	if a := net.ParseIP(o.address); a != nil && !a.IsUnspecified() {
		n.IPs = append(n.IPs, a)
	}
	return n
}

// Serve binds the ports o asks for, then serves them on a's views until
// ctx ends; the returned function waits for that. A port that cannot be
// bound (in use, say) fails Serve, with the ports bound before released,
// so that an agent never runs without the endpoints it was asked for.
func Serve(ctx context.Context, o *Server, a *agent.Agent, rt runtime.Runtime, reg, probeReg *prometheus.Registry, log logr.Logger) (func(), error) {
	checks := []server.HealthCheck{{Name: "syncloop", Check: a.SyncLoopHealthy}, {Name: "pleg", Check: a.PLEGHealthy}}
	cfg := server.Config{Pods: a, RunningPods: rt, HealthChecks: checks, Metrics: reg, ProbeMetrics: probeReg, Log: log, Clock: o.Clock}
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
	kubeletAPI(rt, &cfg)
	if o.Stats != nil {
		cfg.Stats, cfg.ResourceMetrics = o.Stats.Summary, o.Stats.Metrics
	}
	return serve(ctx, o, cfg, log)
}

// kubeletAPIer is a runtime whose logs, exec/attach and port-forward are
// those of what it wraps (provider.Runtime: the provider's methods): it
// says which it has, and the server serves only those.
type kubeletAPIer interface {
	KubeletAPI() (runtime.ContainerLogs, runtime.ContainerStreamer, runtime.PortForwarder)
}

func kubeletAPI(rt runtime.Runtime, cfg *server.Config) {
	if k, ok := rt.(kubeletAPIer); ok {
		cfg.Logs, cfg.Streaming, cfg.PortForward = k.KubeletAPI()
	}
}

type binding struct {
	name, flag string
	addr       string
	h          func() (http.Handler, error)
	tls        *tls.Config
}

func serve(ctx context.Context, o *Server, cfg server.Config, log logr.Logger) (func(), error) {
	var todo []binding
	if o.healthzPort != 0 {
		todo = append(todo, binding{"healthz", "-healthz-port", net.JoinHostPort(o.healthzAddress, strconv.Itoa(o.healthzPort)),
			func() (http.Handler, error) { return server.HealthzHandler(cfg.HealthChecks...), nil }, nil})
	}
	if o.port != 0 {
		auth, err := o.auth()
		if err != nil {
			return nil, err
		}
		tc, err := o.servingTLS(log)
		if err != nil {
			return nil, err
		}
		api := cfg
		api.Auth = auth
		todo = append(todo, binding{"api", "-port", net.JoinHostPort(o.address, strconv.Itoa(o.port)), handler(api), tc})
	}
	if o.readOnlyPort != 0 {
		ro := cfg
		ro.ReadOnly = true
		todo = append(todo, binding{"read-only", "-read-only-port", net.JoinHostPort(o.address, strconv.Itoa(o.readOnlyPort)), handler(ro), nil})
	}
	type bound struct {
		binding
		l net.Listener
		h http.Handler
	}
	var ready []bound
	closeAll := func() {
		for _, b := range ready {
			b.l.Close()
		}
	}
	for _, b := range todo {
		h, err := b.h()
		if err != nil {
			closeAll()
			return nil, err
		}
		l, err := net.Listen("tcp", b.addr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("%s %s: %w", b.flag, b.addr, err)
		}
		ready = append(ready, bound{b, l, h})
	}
	var wg sync.WaitGroup
	for _, b := range ready {
		log.Info("Serving", "server", b.name, "address", b.l.Addr().String(), "tls", b.tls != nil)
		wg.Go(func() {
			if err := server.Serve(ctx, b.l, b.h, b.tls); err != nil {
				log.Error(err, "Server failed", "server", b.name)
			}
		})
	}
	return wg.Wait, nil
}

// handler builds c's server when Serve binds its port.
func handler(c server.Config) func() (http.Handler, error) {
	return func() (http.Handler, error) {
		s, err := server.New(c)
		if err != nil {
			return nil, err
		}
		return s.Handler(), nil
	}
}
