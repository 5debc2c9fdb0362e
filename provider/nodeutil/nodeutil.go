package nodeutil

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podconfig/apiserver"
	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/status"
)

// ErrInvalidConfig is wrapped by NewNode when the options are unusable.
var ErrInvalidConfig = errors.New("nodeutil: invalid config")

// Clients are the apiserver clients a Node needs. With a client-go
// Clientset cs:
//
//	nodeutil.Clients{
//		Pods:      cs.CoreV1().Pods(""),
//		PodStatus: func(ns string) status.PodClient { return cs.CoreV1().Pods(ns) },
//		Nodes:     cs.CoreV1().Nodes(),
//		Leases:    cs.CoordinationV1().Leases(v1.NamespaceNodeLease),
//	}
type Clients struct {
	// Pods lists and watches the pods bound to the node. Required, unless
	// Config.Agent feeds pods another way (Sources).
	Pods apiserver.PodListWatcher
	// PodStatus writes pods' statuses and deletes finished pods. Required.
	PodStatus func(namespace string) status.PodClient
	// Nodes registers the Node and keeps its status. Required.
	Nodes node.NodeClient
	// Leases keeps the node's Lease in kube-node-lease. nil: no Lease;
	// the status is then sent every 10s as the heartbeat.
	Leases node.LeaseClient
}

// Config is what NewNode builds from; Options set it.
type Config struct {
	Clients Clients
	// Template is the Node to register, as virtual-kubelet's
	// NodeConfig.NodeSpec once the provider's ConfigureNode filled it:
	// its labels, annotations, taints, providerID, capacity, allocatable,
	// addresses, daemon endpoints, nodeInfo, phase and conditions (all but
	// Ready, which nodekit computes from Ping) are the Node's. Default:
	// DefaultTemplate(name).
	Template *v1.Node
	// NodeProvider is asked for the node's health (Ping) and pushes its
	// changes (NotifyNodeStatus). Default: the provider, if it is a
	// node.Provider; else none, as virtual-kubelet's NaiveNodeProvider.
	NodeProvider node.Provider
	// ListenAddr serves the kubelet API (logs, exec, attach, port-forward,
	// stats, /pods) there; its port is the Node's kubelet port. Empty (the
	// default): nothing is served, and the Node's kubelet port is the
	// template's. Handler serves the same API for a server of one's own.
	ListenAddr string
	// TLS, if set, serves ListenAddr over TLS, as the apiserver expects.
	TLS *tls.Config
	// Auth, if set, authenticates and authorizes every request
	// (server.NewAuthenticator, server.NewWebhookAuthorizer). nil: every
	// request is served, safe only on loopback.
	Auth *server.Auth
	// PodFilter keeps pods away from the provider, virtual-kubelet's
	// PodEventFilterFunc (agent.Config.PodFilter).
	PodFilter func(*v1.Pod) bool
	// StatusSyncWorkers is how many pod statuses are written at once.
	// Default 8 (agent.Config.StatusSyncWorkers).
	StatusSyncWorkers int
	// PatchStatus writes every pod status with a strategic-merge patch, as
	// the kubelet. Default false: a status whose base the node knows (the
	// pod as the watch delivered it, or the answer to its last write) is
	// written with an update (PUT) on that resourceVersion, as
	// virtual-kubelet's UpdateStatus, which costs the apiserver less CPU;
	// a stale base answers Conflict and is then read and patched
	// (agent.Config.UpdateKnownStatus).
	PatchStatus bool
	// OnNodeStatusUpdateError is virtual-kubelet's
	// NodeStatusUpdateErrorHandler (node.Config.OnStatusUpdateError).
	OnNodeStatusUpdateError func(ctx context.Context, err error) error
	// EnforceCapacity refuses pods past the Node's capacity, as the
	// kubelet. Default false: virtual-kubelet's behaviour, the provider's
	// CreatePod decides (agent.Config.IgnoreCapacity).
	EnforceCapacity bool
	// Recorder receives the pods' events (client-go's record.EventRecorder
	// fits). Optional.
	Recorder provider.EventRecorder
	// Log receives the node's logs. Default logr.Discard().
	Log logr.Logger
	// Agent, if set, adjusts the agent's Config last (sync periods, the
	// evented PLEG's relist, metrics ...); Runtime, Node and the rest are
	// set by then.
	Agent func(*agent.Config)
	// Provider, if set, adjusts the provider runtime's Config last
	// (PollPeriod, Clock ...).
	Provider func(*provider.Config)
}

// Option sets a field of Config.
type Option func(*Config) error

// WithClients sets the apiserver clients.
func WithClients(c Clients) Option { return func(cfg *Config) error { cfg.Clients = c; return nil } }

// WithTemplate sets the Node to register (virtual-kubelet's NodeSpec).
func WithTemplate(n *v1.Node) Option {
	return func(cfg *Config) error { cfg.Template = n; return nil }
}

// WithNodeProvider sets the node's health and status source.
func WithNodeProvider(p node.Provider) Option {
	return func(cfg *Config) error { cfg.NodeProvider = p; return nil }
}

// WithServer serves the kubelet API on addr, over TLS if tlsConfig is set,
// with auth if set.
func WithServer(addr string, tlsConfig *tls.Config, auth *server.Auth) Option {
	return func(cfg *Config) error {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%w: listen address %q: %v", ErrInvalidConfig, addr, err)
		}
		cfg.ListenAddr, cfg.TLS, cfg.Auth = addr, tlsConfig, auth
		return nil
	}
}

// WithPodFilter sets virtual-kubelet's PodEventFilterFunc.
func WithPodFilter(f func(*v1.Pod) bool) Option {
	return func(cfg *Config) error { cfg.PodFilter = f; return nil }
}

// WithPatchStatus writes every pod status with a strategic-merge patch, as
// the kubelet, rather than an update where the node knows the pod's
// resourceVersion (Config.PatchStatus).
func WithPatchStatus() Option {
	return func(cfg *Config) error { cfg.PatchStatus = true; return nil }
}

// WithStatusSyncWorkers sets how many pod statuses are written at once.
func WithStatusSyncWorkers(n int) Option {
	return func(cfg *Config) error {
		if n < 1 {
			return fmt.Errorf("%w: StatusSyncWorkers %d, want at least 1", ErrInvalidConfig, n)
		}
		cfg.StatusSyncWorkers = n
		return nil
	}
}

// WithNodeStatusUpdateErrorHandler sets virtual-kubelet's handler of
// failed node status updates.
func WithNodeStatusUpdateErrorHandler(h func(ctx context.Context, err error) error) Option {
	return func(cfg *Config) error { cfg.OnNodeStatusUpdateError = h; return nil }
}

// WithEnforceCapacity refuses pods past the Node's capacity, as the
// kubelet does.
func WithEnforceCapacity() Option {
	return func(cfg *Config) error { cfg.EnforceCapacity = true; return nil }
}

// WithRecorder sets the event recorder.
func WithRecorder(r provider.EventRecorder) Option {
	return func(cfg *Config) error { cfg.Recorder = r; return nil }
}

// WithLog sets the logger.
func WithLog(l logr.Logger) Option { return func(cfg *Config) error { cfg.Log = l; return nil } }

// WithAgentConfig adjusts the agent's Config last.
func WithAgentConfig(f func(*agent.Config)) Option {
	return func(cfg *Config) error { cfg.Agent = f; return nil }
}

// WithProviderConfig adjusts the provider runtime's Config last.
func WithProviderConfig(f func(*provider.Config)) Option {
	return func(cfg *Config) error { cfg.Provider = f; return nil }
}

// DefaultTemplate is virtual-kubelet's default node spec: its labels
// (type=virtual-kubelet, kubernetes.io/role=agent, the hostname) and phase
// Pending, for the provider to fill (ConfigureNode). Unlike
// virtual-kubelet's it has no empty conditions: nodekit sets them.
func DefaultTemplate(name string) *v1.Node {
	n := &v1.Node{Status: v1.NodeStatus{Phase: v1.NodePending}}
	n.Name = name
	n.Labels = map[string]string{
		"type":               "virtual-kubelet",
		"kubernetes.io/role": "agent",
		v1.LabelHostname:     name,
	}
	return n
}

// Node is a virtual node: a provider's pods run through nodekit's agent,
// its Node and Lease are kept, and the kubelet API is served. Create it
// with NewNode, run it with Run.
type Node struct {
	cfg     Config
	agent   *agent.Agent
	rt      *provider.Runtime
	handler http.Handler
	ln      net.Listener
	ran     sync.Once
}

// NewNode builds a virtual node named name for p, a virtual-kubelet
// provider (PodLifecycleHandler, optionally PodNotifier and the streaming
// and stats methods of package provider): the provider runtime over p,
// the agent with its pods from Clients.Pods and its statuses through
// Clients.PodStatus, the Node registered from the template as a virtual
// node (nothing of the host is reported) with its Lease, and the kubelet
// API. The listener, if any, is bound here, so a port in use fails now.
// Nothing else runs until Run.
func NewNode(name string, p provider.PodLifecycleHandler, opts ...Option) (*Node, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: no provider", ErrInvalidConfig)
	}
	cfg := Config{}
	if np, ok := p.(node.Provider); ok {
		cfg.NodeProvider = np
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Template == nil {
		cfg.Template = DefaultTemplate(name)
	}
	if cfg.Clients.PodStatus == nil || cfg.Clients.Nodes == nil {
		return nil, fmt.Errorf("%w: Clients.PodStatus and Clients.Nodes are required", ErrInvalidConfig)
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}

	pc := provider.Config{Provider: p, Recorder: cfg.Recorder, Log: cfg.Log.WithName("provider")}
	if cfg.Provider != nil {
		cfg.Provider(&pc)
	}
	rt, err := provider.New(pc)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, rt: rt}

	nc, maxPods := nodeConfig(name, &cfg)
	if cfg.ListenAddr != "" {
		if n.ln, err = net.Listen("tcp", cfg.ListenAddr); err != nil {
			return nil, fmt.Errorf("nodeutil: kubelet API: %w", err)
		}
		_, port, _ := net.SplitHostPort(n.ln.Addr().String())
		p, _ := strconv.Atoi(port)
		nc.KubeletPort = int32(p)
	}
	ac := agent.Config{
		NodeName:          name,
		Runtime:           rt,
		PodSource:         cfg.Clients.Pods,
		PodFilter:         cfg.PodFilter,
		StatusClient:      cfg.Clients.PodStatus,
		Node:              nc,
		MaxPods:           maxPods,
		IgnoreCapacity:    !cfg.EnforceCapacity,
		StatusSyncWorkers: cfg.StatusSyncWorkers,
		UpdateKnownStatus: !cfg.PatchStatus,
		Log:               cfg.Log,
	}
	if cfg.Recorder != nil {
		ac.Recorder = cfg.Recorder
	}
	if cfg.Agent != nil {
		cfg.Agent(&ac)
	}
	if n.agent, err = agent.New(ac); err != nil {
		n.closeListener()
		return nil, err
	}
	sc := server.Config{Pods: n.agent, RunningPods: rt, Stats: rt, ResourceMetrics: rt, Auth: cfg.Auth, Log: cfg.Log.WithName("server"),
		HealthChecks: []server.HealthCheck{{Name: "pleg", Check: n.agent.PLEGHealthy}}}
	sc.Logs, sc.Streaming, sc.PortForward = rt.KubeletAPI()
	s, err := server.New(sc)
	if err != nil {
		n.closeListener()
		return nil, err
	}
	n.handler = s.Handler()
	return n, nil
}

// nodeConfig maps cfg's template onto node.Config: a virtual node whose
// template is the provider's first node (templateProvider), with the
// pods capacity as MaxPods.
func nodeConfig(name string, cfg *Config) (*node.Config, int) {
	t := cfg.Template
	maxPods := 0
	if q, ok := t.Status.Capacity[v1.ResourcePods]; ok && q.Value() > 0 {
		maxPods = int(q.Value())
	}
	nc := &node.Config{
		Nodes:               cfg.Clients.Nodes,
		Leases:              cfg.Clients.Leases,
		Virtual:             true,
		NodeInfo:            t.Status.NodeInfo.DeepCopy(),
		Taints:              t.Spec.Taints,
		ProviderID:          t.Spec.ProviderID,
		Phase:               t.Status.Phase,
		Provider:            &templateProvider{template: t, np: cfg.NodeProvider},
		OnStatusUpdateError: cfg.OnNodeStatusUpdateError,
		KubeletPort:         node.NoKubeletPort,
		Log:                 cfg.Log.WithName("node"),
	}
	if p := t.Status.DaemonEndpoints.KubeletEndpoint.Port; p > 0 {
		nc.KubeletPort = p
	}
	if h := t.Labels[v1.LabelHostname]; h != "" && h != name {
		nc.Hostname = h
	}
	return nc, maxPods
}

// templateProvider is the node provider the controller sees: the template
// is the provider's first node (everything it sets is applied as a later
// NotifyNodeStatus push is, its Ready condition aside), then the node
// provider's pushes follow. Without a node provider Ping always succeeds,
// as virtual-kubelet's NaiveNodeProvider.
type templateProvider struct {
	template *v1.Node
	np       node.Provider
}

func (t *templateProvider) Ping(ctx context.Context) error {
	if t.np == nil {
		return nil
	}
	return t.np.Ping(ctx)
}

func (t *templateProvider) NotifyNodeStatus(ctx context.Context, cb func(*v1.Node)) {
	first := t.template.DeepCopy()
	conds := first.Status.Conditions[:0]
	for _, c := range first.Status.Conditions {
		// nodekit computes Ready (Ping, health checks); a condition
		// without a status is virtual-kubelet's empty placeholder.
		if c.Type != v1.NodeReady && c.Status != "" {
			conds = append(conds, c)
		}
	}
	first.Status.Conditions = conds
	cb(first)
	if t.np != nil {
		t.np.NotifyNodeStatus(ctx, cb)
	}
}

// Run runs the agent (pods, Node, Lease) and the kubelet API until ctx
// ends; it returns the first error of either, after both stopped. It may
// be called once.
func (n *Node) Run(ctx context.Context) error {
	err := errors.New("nodeutil: Run called twice")
	n.ran.Do(func() { err = n.run(ctx) })
	return err
}

func (n *Node) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	if n.ln != nil {
		wg.Go(func() {
			err := server.Serve(ctx, n.ln, n.handler, n.cfg.TLS)
			if err != nil {
				err = fmt.Errorf("nodeutil: kubelet API: %w", err)
			}
			errc <- err
			cancel()
		})
	}
	wg.Go(func() {
		errc <- n.agent.Run(ctx)
		cancel()
	})
	wg.Wait()
	close(errc)
	var first error
	for err := range errc {
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (n *Node) closeListener() {
	if n.ln != nil {
		_ = n.ln.Close()
	}
}

// Agent is the node's agent (its Pods, Node controller, health).
func (n *Node) Agent() *agent.Agent { return n.agent }

// Runtime is the provider runtime over the provider.
func (n *Node) Runtime() *provider.Runtime { return n.rt }

// Handler serves the kubelet API, for a server of one's own.
func (n *Node) Handler() http.Handler { return n.handler }

// Addr is the kubelet API's address, or nil when not served.
func (n *Node) Addr() net.Addr {
	if n.ln == nil {
		return nil
	}
	return n.ln.Addr()
}
