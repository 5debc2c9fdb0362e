package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// ErrInvalidConfig is wrapped by New when the Config is unusable.
var ErrInvalidConfig = errors.New("node: invalid config")

// NodeClient reaches the apiserver's Nodes; client-go's CoreV1().Nodes()
// satisfies it. The Controller keeps a Node Get or UpdateStatus returns
// read-only (it builds a new one to change it), so a client may answer
// from a shared cache (an informer's) without a copy.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
	Create(ctx context.Context, node *v1.Node, opts metav1.CreateOptions) (*v1.Node, error)
	Update(ctx context.Context, node *v1.Node, opts metav1.UpdateOptions) (*v1.Node, error)
	UpdateStatus(ctx context.Context, node *v1.Node, opts metav1.UpdateOptions) (*v1.Node, error)
}

// NodeWatcher is what the controller needs, beside NodeClient, to keep
// its Node current from a watch, as the kubelet's node informer:
// client-go's CoreV1().Nodes() has it. The controller finds it on
// Config.Nodes by type assertion; with a NodeClient without it, the Node
// is read from the apiserver's cache before each status computation
// instead, and others' changes are seen only then (see Run).
type NodeWatcher interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// LeaseClient reaches the Leases of one namespace; client-go's
// CoordinationV1().Leases("kube-node-lease") satisfies it.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// Provider is virtual-kubelet's NodeProvider: a provider whose node's
// health and status it knows better than the defaults.
type Provider interface {
	// Ping reports whether the provider is healthy; an error makes the node
	// NotReady with the error in the Ready condition's message.
	Ping(ctx context.Context) error
	// NotifyNodeStatus is called once, before registration; the provider
	// calls cb (from any goroutine, until ctx ends) whenever its node
	// changed. cb's node carries what the provider sets, applied as
	// virtual-kubelet applies it: its labels and annotations (but for the
	// keys Config and the kubelet own; one it drops later is removed unless
	// someone changed it since), a non-empty capacity, allocatable, address
	// or image list, a non-zero kubelet port, each non-empty nodeInfo field
	// and a phase replace the controller's, and its conditions replace the
	// controller's of the same type (others are added). Its taints and
	// providerID count at registration only, as virtual-kubelet registers
	// its provider's node spec and later sends the status. The change is
	// sent at once. cb copies the node.
	NotifyNodeStatus(ctx context.Context, cb func(*v1.Node))
}

// HealthCheck is a check whose failure makes the node NotReady, as the
// kubelet's runtime health checks (the PLEG's) do: Check returns nil when
// healthy, else an error, and the node's message is "<Name> is not
// healthy: <error>". It has the shape of server.HealthCheck, so the same
// funcs (pleg's Healthy, agent.Agent's PLEGHealthy) serve both.
type HealthCheck struct {
	Name  string
	Check func() error
}

// PressureSource reports resource pressure, the kubelet's eviction
// manager's view. Each method is called on every status computation.
type PressureSource interface {
	MemoryPressure() bool
	DiskPressure() bool
	PIDPressure() bool
}

// Setter adjusts a computed status before it is compared with the last one
// sent; it runs on every computation (every UpdateFrequency), after the
// defaults and the provider's status, before the conditions, and on every
// InitialNode (a status without conditions, images or runtime version),
// never two runs at once. A Setter may
// replace status's maps and slices but must not modify them in place: they
// may be shared with the last status sent. An error is logged and the
// status is sent as the setters left it.
type Setter func(ctx context.Context, status *v1.NodeStatus) error

// NoKubeletPort, as Config.KubeletPort, makes the Node report port 0: no
// kubelet endpoint.
const NoKubeletPort int32 = -1

// Config configures a Controller. NodeName and Nodes are required; every
// other field has the default its comment gives.
type Config struct {
	// NodeName is the Node's name, a DNS subdomain. Required.
	NodeName string
	// Nodes reaches the apiserver's Nodes. Required. If it is a NodeWatcher
	// too (client-go's is), the Node is watched after registration.
	Nodes NodeClient
	// Leases reaches the Leases of LeaseNamespace. nil: no Lease; the status
	// is then sent every UpdateFrequency, as the kubelet's heartbeat without
	// leases.
	Leases LeaseClient
	// LeaseNamespace is the Leases' namespace. Default "kube-node-lease".
	LeaseNamespace string

	// Runtime gives readiness (RuntimeReady, NetworkReady), the runtime
	// version and, if it is a runtime.ImageService, the image list.
	// Optional: without it the node is Ready unless a check fails.
	Runtime runtime.Runtime
	// HealthChecks make the node NotReady when they fail (the PLEG's
	// Healthy, for one).
	HealthChecks []HealthCheck
	// Provider is asked for its health and pushes status changes. Optional.
	Provider Provider
	// Pressure reports memory, disk and PID pressure. Optional: no pressure.
	Pressure PressureSource
	// Setters adjust every computed status (allocatable after reservations,
	// for example). Optional.
	Setters []Setter

	// Labels are added to the kubelet's (kubernetes.io/hostname, the
	// stable and beta os and arch labels) at registration.
	Labels map[string]string
	// Annotations are set at registration and reconciled on a Node that
	// exists, as Labels.
	Annotations map[string]string
	// Taints are set at registration, the kubelet's --register-with-taints.
	Taints []v1.Taint
	// ProviderID is spec.providerID, the kubelet's --provider-id: set at
	// registration, and on a registered Node that has none (the apiserver
	// refuses to change one that is set).
	ProviderID string

	// Virtual says the node is not this host (a virtual-kubelet style
	// provider's): nothing of the host is read or reported. The capacity
	// is Capacity and MaxPods only, the addresses Addresses (default: the
	// Hostname address alone), nodeInfo NodeInfo only, and
	// ephemeral-storage is not required for Ready. Default false: the
	// host's capacity, addresses and nodeInfo fill what Config leaves out.
	Virtual bool
	// NodeInfo, when set, is status.nodeInfo in place of the host's
	// (machine and boot IDs, kernel, OS image, OS and architecture are
	// then its fields, empty where it leaves them empty); KubeletVersion
	// and the runtime's version fill its empty kubeletVersion and
	// containerRuntimeVersion. Its operatingSystem and architecture, when
	// set, are the os and arch labels' values.
	NodeInfo *v1.NodeSystemInfo
	// Phase is status.phase, a field the kubelet leaves empty (it is
	// deprecated) and virtual-kubelet providers set (Running). Optional.
	Phase v1.NodePhase
	// MaxPods is the pods capacity. Default 110.
	MaxPods int
	// PodsPerCore, if positive, caps the pods capacity at this many per
	// core of the Machine (the kubelet's --pods-per-core): it is then the
	// lesser of MaxPods and PodsPerCore×cores. Default 0: MaxPods.
	PodsPerCore int
	// Machine is read on every status computation for the capacity's cpu,
	// memory and ephemeral-storage and nodeInfo's machine identity, as the
	// kubelet reads cadvisor's machine info. Default HostMachine of
	// RootDir.
	Machine MachineInfo
	// Capacity overrides the Machine's capacity per resource; pods comes
	// from MaxPods and PodsPerCore.
	Capacity v1.ResourceList
	// SystemReserved and KubeReserved are kept from pods, the kubelet's
	// --system-reserved and --kube-reserved: allocatable is the capacity
	// minus both and minus EvictionHard's thresholds, per resource, never
	// below zero (the kubelet's node allocatable). Optional.
	SystemReserved, KubeReserved v1.ResourceList
	// EvictionHard are the hard eviction thresholds allocatable keeps from
	// pods, the kubelet's --eviction-hard: memory.available's off memory,
	// nodefs.available's off ephemeral-storage, a percentage of the
	// capacity computed at each status. The agent fills it from
	// agent.Config.Eviction. Optional.
	EvictionHard []HardEviction
	// Allocatable overrides allocatable per resource, after the
	// reservations. Default: the capacity minus the reservations.
	Allocatable v1.ResourceList
	// RootDir is the directory whose file system is the ephemeral-storage
	// capacity of the default Machine. Default "/".
	RootDir string
	// NodeIPs are the node's IPs, the kubelet's --node-ip: one, or two of
	// different families (dual-stack, primary first), reported as
	// InternalIPs in that order, then the Hostname address. A single
	// "0.0.0.0" or "::" picks the host's address as the default does,
	// preferring IPv4 or IPv6 as the kubelet's. Multicast and link-local
	// addresses are refused; unlike the kubelet's, a loopback address or
	// one not on the host is taken (simulated nodes, tests). Exclusive
	// with Addresses.
	NodeIPs []string
	// Addresses are the node's whole address list, for a node whose
	// addresses are not the kubelet's (a provider's, ExternalIPs). Default
	// (without NodeIPs): InternalIP of the host's first global unicast
	// address (IPv4 first), or of Hostname if it is an IP, and Hostname.
	Addresses []v1.NodeAddress
	// Hostname is the kubernetes.io/hostname label and the Hostname
	// address. Default NodeName (the kubelet's default when the node name
	// is the host's), so that many nodes in one process stay apart.
	Hostname string
	// KubeletPort is daemonEndpoints.kubeletEndpoint.port. Default 10250;
	// NoKubeletPort reports 0, for an agent that serves no API (the
	// apiserver then has no endpoint to ask for logs or exec).
	KubeletPort int32
	// KubeletVersion is nodeInfo.kubeletVersion. Optional.
	KubeletVersion string
	// MaxImages is how many images (largest first) the status lists, the
	// kubelet's --node-status-max-images. Default (0) 50, as the
	// kubelet's; negative (the kubelet's -1): every image, no cap. The
	// kubelet's 0, none, is NoImages, since 0 here is the default.
	MaxImages int
	// NoImages lists no images in the status, whatever MaxImages says: the
	// kubelet's --node-status-max-images=0, which keeps the Node objects
	// of a large cluster small at the cost of the scheduler's
	// ImageLocality score (it reads the list). A list the Node carried is
	// cleared, and the runtime is not asked for its images for the status.
	NoImages bool
	// ImageRefreshPeriod is how often the runtime's image list is read for
	// the status, the kubelet's image manager cache (imageCacheRefreshPeriod):
	// each status computation takes the list read last, reading it again
	// once it is this old. Default 30s.
	ImageRefreshPeriod time.Duration

	// UpdateFrequency is how often the status is computed, the kubelet's
	// nodeStatusUpdateFrequency. Default 10s.
	UpdateFrequency time.Duration
	// ReportFrequency is how long an unchanged status goes unsent, the
	// kubelet's nodeStatusReportFrequency. Default 5m (UpdateFrequency
	// without Leases).
	ReportFrequency time.Duration
	// LeaseDuration is the Lease's leaseDurationSeconds. Default 40s.
	LeaseDuration time.Duration
	// RenewInterval is how often the Lease is renewed. Default a quarter of
	// LeaseDuration.
	RenewInterval time.Duration
	// RequestTimeout bounds each apiserver call. Default 10s.
	RequestTimeout time.Duration
	// RuntimeDownAfter is how long the runtime may go without a ready
	// answer to Status before the node reports "container runtime is
	// down"; until then a failed Status call leaves its last answer
	// standing, as the kubelet's runtime state does. Default 30s, the
	// kubelet's maxWaitForContainerRuntime.
	RuntimeDownAfter time.Duration

	// RegisterAgain registers the Node again when it is deleted under a
	// running controller. Default false, the kubelet's behaviour: deleting
	// a Node is how an operator forces pods off it (StatefulSet pods, whose
	// replacements wait for the old pod to be gone), so the Node stays
	// deleted (each status update fails with "not found") until the agent
	// restarts or someone creates the Node again, whose status the
	// controller then keeps.
	RegisterAgain bool

	// OnRepeatedHeartbeatFailure is called when a heartbeat fails again: a
	// Lease renewal failing (but for a conflict) after a failed attempt,
	// or a try of a status update failing after a failed try of the same
	// update (from the second of its five on). It is the kubelet's
	// onRepeatedHeartbeatFailure, where the kubelet closes its clients'
	// connections so that the next attempt dials afresh instead of
	// waiting on a dead one (with client-go, close the idle connections of
	// the clients' transport). Optional. It runs on the controller's
	// goroutines and must not block.
	OnRepeatedHeartbeatFailure func()

	// OnStatusUpdateError is called when a status update failed every
	// try (or found the Node deleted), virtual-kubelet's
	// NodeStatusUpdateErrorHandler: if it returns nil (it may have
	// created the Node again, say), the update is tried once more at once,
	// from the Node read again; its error, or a second failure, is the
	// computation's. Optional. It runs on the status loop.
	OnStatusUpdateError func(ctx context.Context, err error) error

	// Clock drives every timer. Default the real clock.
	Clock clock.Clock
	// Log receives the controller's logs. Default logr.Discard().
	Log logr.Logger
}

func (c *Config) setDefaults() error {
	if c.NodeName == "" {
		return fmt.Errorf("%w: NodeName is required", ErrInvalidConfig)
	}
	if errs := validation.IsDNS1123Subdomain(c.NodeName); len(errs) > 0 {
		return fmt.Errorf("%w: NodeName %q: %s", ErrInvalidConfig, c.NodeName, strings.Join(errs, "; "))
	}
	if c.Nodes == nil {
		return fmt.Errorf("%w: Nodes is required", ErrInvalidConfig)
	}
	if c.Hostname == "" {
		c.Hostname = c.NodeName
	}
	if errs := validation.IsValidLabelValue(c.Hostname); len(errs) > 0 {
		return fmt.Errorf("%w: Hostname %q: %s", ErrInvalidConfig, c.Hostname, strings.Join(errs, "; "))
	}
	for k, v := range c.Labels {
		errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...)
		if len(errs) > 0 {
			return fmt.Errorf("%w: label %s=%s: %s", ErrInvalidConfig, k, v, strings.Join(errs, "; "))
		}
	}
	for k, v := range c.Annotations {
		errs := validation.IsQualifiedName(k)
		if len(v) > 256*1024 {
			errs = append(errs, "value longer than 256 KiB")
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w: annotation %s: %s", ErrInvalidConfig, k, strings.Join(errs, "; "))
		}
	}
	for _, rl := range []v1.ResourceList{c.Capacity, c.Allocatable, c.SystemReserved, c.KubeReserved} {
		for name, q := range rl {
			if q.Sign() < 0 {
				return fmt.Errorf("%w: negative %s %s", ErrInvalidConfig, name, q.String())
			}
		}
	}
	for name, a := range c.Allocatable {
		if cp, ok := c.Capacity[name]; ok && a.Cmp(cp) > 0 {
			return fmt.Errorf("%w: allocatable %s %s above capacity %s", ErrInvalidConfig, name, a.String(), cp.String())
		}
	}
	for _, h := range c.EvictionHard {
		if h.Quantity != nil && h.Quantity.Sign() < 0 || h.Percentage < 0 || h.Percentage > 1 {
			return fmt.Errorf("%w: hard eviction threshold %s: want a quantity not negative or a percentage from 0 to 100%%", ErrInvalidConfig, h.Signal)
		}
	}
	if err := validateNodeIPs(c.NodeIPs); err != nil {
		return err
	}
	if len(c.NodeIPs) > 0 && len(c.Addresses) > 0 {
		return fmt.Errorf("%w: NodeIPs and Addresses are exclusive", ErrInvalidConfig)
	}
	if c.MaxPods < 0 {
		return fmt.Errorf("%w: negative MaxPods %d", ErrInvalidConfig, c.MaxPods)
	}
	if c.PodsPerCore < 0 {
		return fmt.Errorf("%w: negative PodsPerCore %d", ErrInvalidConfig, c.PodsPerCore)
	}
	if c.KubeletPort < 0 && c.KubeletPort != NoKubeletPort {
		return fmt.Errorf("%w: negative KubeletPort %d", ErrInvalidConfig, c.KubeletPort)
	}
	for _, d := range []time.Duration{c.UpdateFrequency, c.ReportFrequency, c.LeaseDuration, c.RenewInterval, c.RequestTimeout, c.RuntimeDownAfter, c.ImageRefreshPeriod} {
		if d < 0 {
			return fmt.Errorf("%w: negative duration %v", ErrInvalidConfig, d)
		}
	}
	for _, h := range c.HealthChecks {
		if h.Name == "" || h.Check == nil {
			return fmt.Errorf("%w: health check %q without name or func", ErrInvalidConfig, h.Name)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.UpdateFrequency, 10*time.Second)
	if c.Leases == nil {
		def(&c.ReportFrequency, c.UpdateFrequency)
	}
	def(&c.ReportFrequency, 5*time.Minute)
	def(&c.LeaseDuration, 40*time.Second)
	def(&c.RenewInterval, c.LeaseDuration/4)
	def(&c.RequestTimeout, 10*time.Second)
	def(&c.RuntimeDownAfter, 30*time.Second)
	def(&c.ImageRefreshPeriod, 30*time.Second)
	if c.LeaseDuration < time.Second {
		return fmt.Errorf("%w: LeaseDuration %v below 1s", ErrInvalidConfig, c.LeaseDuration)
	}
	if c.LeaseNamespace == "" {
		c.LeaseNamespace = v1.NamespaceNodeLease
	}
	if c.MaxPods == 0 {
		c.MaxPods = 110
	}
	switch c.KubeletPort {
	case 0:
		c.KubeletPort = 10250
	case NoKubeletPort:
		c.KubeletPort = 0
	}
	if c.MaxImages == 0 {
		c.MaxImages = 50
	}
	if c.RootDir == "" {
		c.RootDir = "/"
	}
	if c.Machine == nil && c.Virtual {
		c.Machine = Machine{} // nothing of the host: Capacity and MaxPods only
	}
	if c.Machine == nil {
		c.Machine = HostMachine{RootDir: c.RootDir}
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return nil
}

// validateNodeIPs checks ips as the kubelet checks --node-ip: one IP, or
// a dual-stack pair; an unspecified address only alone; no multicast or
// link-local address. Unlike the kubelet, a loopback address or one the
// host does not have is taken: a simulated node's IPs are not the host's,
// and tests run nodes on loopback.
func validateNodeIPs(ips []string) error {
	if len(ips) > 2 {
		return fmt.Errorf("%w: NodeIPs %q: want one IP or a dual-stack pair", ErrInvalidConfig, ips)
	}
	var parsed []net.IP
	for _, s := range ips {
		ip := net.ParseIP(s)
		switch {
		case ip == nil:
			return fmt.Errorf("%w: NodeIPs: %q is not an IP address", ErrInvalidConfig, s)
		case ip.IsUnspecified() && len(ips) > 1:
			return fmt.Errorf("%w: NodeIPs %q: an unspecified address only alone", ErrInvalidConfig, ips)
		case ip.IsMulticast():
			return fmt.Errorf("%w: NodeIPs: %s: node IP can't be a multicast address", ErrInvalidConfig, s)
		case ip.IsLinkLocalUnicast():
			return fmt.Errorf("%w: NodeIPs: %s: node IP can't be a link-local unicast address", ErrInvalidConfig, s)
		}
		parsed = append(parsed, ip)
	}
	if len(parsed) == 2 && (parsed[0].To4() == nil) == (parsed[1].To4() == nil) {
		return fmt.Errorf("%w: NodeIPs %q: a dual-stack pair must have one IPv4 and one IPv6 address", ErrInvalidConfig, ips)
	}
	return nil
}
