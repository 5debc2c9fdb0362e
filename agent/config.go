package agent

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/apiserver"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// ErrInvalidConfig is wrapped by New when the Config is unusable.
var ErrInvalidConfig = errors.New("agent: invalid config")

// Clock is what the agent's parts need of a clock.
type Clock interface {
	clock.WithTicker
	clock.WithDelayedExecution
}

// Config configures an Agent. NodeName and Runtime are required; every other
// field has the default its comment gives.
type Config struct {
	// NodeName is the node the agent runs pods for. Required.
	NodeName string
	// Runtime runs the pods. Required.
	Runtime runtime.Runtime

	// StaticPodPath is a directory (or file) of static pod manifests, the
	// kubelet's --pod-manifest-path. Empty: no file source.
	StaticPodPath string
	// FileCheckFrequency is how often StaticPodPath is re-read besides
	// fsnotify. Default 20s.
	FileCheckFrequency time.Duration
	// ManifestURL serves static pods, the kubelet's --manifest-url. Empty:
	// no HTTP source.
	ManifestURL string
	// ManifestURLHeader is sent with every manifest request.
	ManifestURLHeader http.Header
	// HTTPCheckFrequency is how often ManifestURL is polled. Default 20s.
	HTTPCheckFrequency time.Duration
	// PodSource lists and watches the pods bound to the node; client-go's
	// CoreV1().Pods("") fits. nil: no apiserver source.
	PodSource apiserver.PodListWatcher
	// PodFilter, if set, keeps the PodSource's pods for which it returns
	// false away from the agent, virtual-kubelet's PodEventFilterFunc (see
	// apiserver.Config.Filter for what happens to a pod that stops
	// passing). For a pod source of one's own (a shared informer, say),
	// name it in Sources and feed it through Channel. nil: every pod bound
	// to the node.
	PodFilter func(*v1.Pod) bool
	// Sources names extra sources the caller feeds through Channel, for
	// example an in-memory source in a test harness. Housekeeping waits until
	// each has sent its first SET.
	Sources []string

	// StatusClient reaches the apiserver's pods of a namespace for status
	// patches, deletions and mirror pods; client-go's CoreV1().Pods fits.
	// nil: standalone, statuses are kept and served only.
	StatusClient func(namespace string) status.PodClient
	// Nodes reads the Node for mirror pods' owner references (needed with
	// NodeRestriction admission). Optional.
	Nodes status.NodeGetter
	// Node, when set, registers the node with the apiserver and keeps its
	// status and Lease (package node); Node.Nodes is required then. The
	// agent sets its NodeName and, where unset, Runtime, MaxPods (the pods
	// capacity), NodeIPs (without Addresses), Clock and Log, and adds the
	// PLEG's health to HealthChecks; the registered Node is then the owner
	// of mirror pods. nil: no Node is registered.
	Node *node.Config
	// Eviction, when set, runs the kubelet's eviction manager (package
	// eviction) with the agent: it watches the node's signals in
	// Eviction.Summary (required then; the stats provider of
	// /stats/summary), is the Node's PressureSource (MemoryPressure,
	// DiskPressure, PIDPressure) unless Node sets one, takes its hard
	// thresholds off the Node's allocatable (node.Config.EvictionHard), is the first admit
	// handler (whatever AdmitHandlers is), and evicts pods through the
	// kill path of critical pod preemption (Failed, reason Evicted, a
	// DisruptionTarget condition). The agent fills, where unset,
	// ActivePods, Killer, PodCleanedUp, ContainerGC (the Runtime's
	// runtime.GarbageCollector with ContainerGCPolicy), ImageGC (every
	// unused image past ImageMinimumGCAge, when the Runtime manages
	// images), NodeRef, Recorder, Clock and Log. nil: no eviction.
	Eviction *eviction.Config
	// Secrets reads the secrets of a namespace for the pods' image pull
	// secrets; client-go's CoreV1().Secrets(namespace) fits. Each is read
	// at most once a minute. nil: none can be read, and pods naming pull
	// secrets get a FailedToRetrieveImagePullSecret event and pull without.
	Secrets func(namespace string) SecretGetter
	// NodeIPs are the node's addresses, primary first, reported as host IPs
	// (and pod IPs of host-network pods); the first one's family is the
	// primary family of pod IPs. With Node, they are its NodeIPs (one IP
	// or a dual-stack pair, the kubelet's --node-ip). Optional.
	NodeIPs []string

	// SyncFrequency is how often every pod is synced again even without a
	// change, the kubelet's --sync-frequency. Default 1m.
	SyncFrequency time.Duration
	// StatusSyncWorkers is how many pods' statuses are written to the
	// apiserver at once (status.Config.SyncWorkers). Default 8; the
	// kubelet writes one at a time. A client-side rate limit (client-go's
	// QPS, 5 by default) bounds them too.
	StatusSyncWorkers int
	// UpdateKnownStatus writes a status whose base the agent knows with an
	// update (PUT) of pods/status on that resourceVersion rather than a
	// strategic-merge patch (status.Config.UpdateKnownStatus): less of the
	// apiserver's CPU per write. Default false: the kubelet patches;
	// provider/nodeutil sets it.
	UpdateKnownStatus bool
	// FirstStatusDelay is how long a pod's first sync may hold back its
	// first status while the runtime starts the pod. A pod the runtime
	// starts within it gets one status write, its Running one, instead of
	// two (Pending with ContainerCreating, then Running): on an in-memory
	// runtime (runtime/fake, a simulator of many nodes) that halves the
	// pod status writes of a rollout. A start that takes longer reports
	// Pending when the delay ends, as before. Default 0: the kubelet's
	// order, the status set before the runtime is called. Not used when the
	// Runtime owns pod status (a provider's first status is always the
	// one it reports from its CreatePod).
	FirstStatusDelay time.Duration
	// SyncErrorBackOff is how long after a failed sync a pod is synced
	// again (plus jitter). Default 10s, as the kubelet's.
	SyncErrorBackOff time.Duration
	// RelistPeriod is the PLEG's relist period. Default 1s. With the
	// evented PLEG it applies while the event stream is down.
	RelistPeriod time.Duration
	// PLEGEventCapacity bounds the PLEG's event channel, whose buffer is
	// allocated whole with the agent (48 bytes an event: 47 KiB at the
	// default, most of an idle agent's heap). A relist of pods that all
	// changed at once sends an event or two per container; events that do
	// not fit are dropped and counted (kubelet_pleg_discard_events), and
	// their pods wait for the next resync (SyncFrequency). Default
	// max(1000, 4*MaxPods): the kubelet's 1000, room for several per pod.
	// A simulator of many nodes with few pods each sets it lower.
	PLEGEventCapacity int
	// RelistOnRequest has the relist PLEG relist at once (after
	// pleg.Config.MinRelistInterval, coalesced) when the agent has started
	// containers and when a pod worker waits for status newer than its
	// last sync, so that a pod's Running status and a deleted pod's kill
	// do not wait out RelistPeriod. Default false: the kubelet's timing
	// (what sim reproduces to the second); examples/kubenode turns it on.
	// No effect with EventedPLEG, whose stream brings the changes at once.
	RelistOnRequest bool
	// EventedPLEG turns the evented PLEG on, as the kubelet's EventedPLEG
	// feature gate (off by default there too): when the Runtime streams
	// container events (runtime.ContainerEventer: the CRI's
	// GetContainerEvents on containerd 2.x, runtime/fake, fakecri) the agent
	// learns of changes from the stream as they happen, still relisting
	// every RelistPeriod (at most 2s; see below), and reopens a broken
	// stream with back-off (package pleg, EventedPLEG); a runtime that
	// cannot stream is relisted.
	//
	// The runtime may drop events (containerd and fakecri drop them for a
	// subscriber that lags, e.g. with hundreds of pods starting at once):
	// the cache is declared current only by a relist, which runs every
	// RelistPeriod (at most 2s) while streaming and finds what the stream
	// missed. The kubelet declares it current every few seconds without
	// one, so that a pod worker can act on status from before its own sync
	// and start a container a second time (kubernetes/kubernetes#123087).
	// Events still arrive at once; the price is that listing. Without
	// EventedPLEG, the relist PLEG is used.
	EventedPLEG bool
	// StreamingRelistPeriod is the relist period while the event stream of
	// a runtime that drops no event works: a status owner (package
	// provider). Default 5m, as the kubelet's evented mode. A CRI runtime's
	// stream may drop events, so its relists keep RelistPeriod, at most 2s
	// (see EventedPLEG).
	StreamingRelistPeriod time.Duration
	// RuntimeCheckPeriod is how often the runtime's Status is checked; while
	// it is not ready no pod is synced. Default 5s.
	RuntimeCheckPeriod time.Duration
	// RuntimeDownAfter is how long the runtime may go without a ready
	// answer to Status before it counts as down (no pod is synced, and the
	// node, unless Node sets its own, reports "container runtime is
	// down"); until then a failed Status call leaves the last answer
	// standing, as the kubelet's runtime state does. Default 30s, the
	// kubelet's maxWaitForContainerRuntime.
	RuntimeDownAfter time.Duration
	// CrashLoopBackOffInitial and CrashLoopBackOffMax bound the restart
	// back-off of crashing containers. Defaults 10s and 300s.
	CrashLoopBackOffInitial, CrashLoopBackOffMax time.Duration

	// MaxPods is how many pods may run at once; later ones are rejected with
	// reason OutOfpods. Default 110, as the kubelet's. It is also the pods
	// capacity of the Node.
	MaxPods int
	// IgnoreCapacity admits pods whatever the node's capacity, as
	// virtual-kubelet does for its providers: neither MaxPods nor the
	// Node's pods count and resources are checked
	// (admission.GeneralPredicatesWithoutResources; the OS, node name,
	// affinity, host port and NoExecute taint checks stay), so a pod bound
	// past a provider's advertised capacity is the provider's to take or
	// refuse in CreatePod, and none fails OutOfpods for good. Default
	// false, the kubelet's, which a runtime that runs containers on this
	// host needs.
	IgnoreCapacity bool
	// DenyPrivileged rejects pods with privileged containers (reason
	// PrivilegedNotAllowed). Default false: they are admitted, as by the
	// kubelet, which no longer has allow-privileged. With a CRI runtime set
	// cri.Config.DenyPrivileged too.
	DenyPrivileged bool
	// DenyHostNamespaces rejects pods using the host's network, PID or IPC
	// namespace (reason HostNamespacesNotAllowed). Default false: they are
	// admitted, as by the kubelet for every source; kubeadm's static
	// control-plane pods use the host network.
	DenyHostNamespaces bool
	// AllowedUnsafeSysctls are the sysctls, besides the kubelet's safe ones,
	// that pods may set (the kubelet's --allowed-unsafe-sysctls): names or
	// patterns ending in "*", each namespaced (kernel.sem, kernel.shm*,
	// kernel.msg*, fs.mqueue.*, net.*). A pod setting another is rejected
	// with reason SysctlForbidden (admission.Sysctls). Default none.
	AllowedUnsafeSysctls []string
	// AdmitHandlers decide, in order, whether a new pod may run; the first
	// refusal fails the pod with its reason and message (see package
	// admission). nil: DefaultAdmitHandlers, the built-in checks from
	// MaxPods, DenyHostNamespaces, DenyPrivileged and the sysctls (the
	// kernel's safe ones and AllowedUnsafeSysctls), then, with Node,
	// admission.GeneralPredicatesWithPreemption (the pods capacity,
	// resources, node affinity and name, host ports, NoExecute taints, OS)
	// against the registered Node and, before registration, the Node the
	// agent would register (node.Controller.InitialNode: labels, taints,
	// capacity and allocatable), as the kubelet's; a pod does not wait for
	// the registration. With Node the pods capacity is the Node's (MaxPods
	// unless Node.MaxPods), checked there instead of by MaxPods, so that a
	// critical pod (static, or of priority system-cluster-critical or
	// more) short only of resources preempts other pods, as the kubelet's
	// CriticalPodAdmissionHandler: they are evicted (Failed, reason
	// Preempting) and waited for, on the sync loop. Without Node
	// (standalone) the Node's checks are not made: there is no Node to
	// check against (the kubelet, standalone, checks its initial node). To
	// add a check, append it to DefaultAdmitHandlers(c); a non-nil list is
	// used as it is.
	AdmitHandlers []admission.PodAdmitHandler

	// ContainerGCPeriod is how often dead containers are collected when the
	// Runtime is a runtime.GarbageCollector, the kubelet's 1m; negative: no
	// periodic container GC.
	ContainerGCPeriod time.Duration
	// ContainerGCPolicy bounds the dead containers kept. nil:
	// DefaultContainerGCPolicy(), the kubelet's (min age 0, one dead instance
	// per container, no overall limit).
	ContainerGCPolicy *runtime.GCPolicy
	// ImageGCPeriod is how often the image filesystem is checked when the
	// Runtime manages images and reports their filesystem
	// (runtime.ImageService and runtime.ImageFsInfoer), the kubelet's 5m;
	// negative: no image GC.
	ImageGCPeriod time.Duration
	// ImageGCHighThresholdPercent is the image filesystem usage at which
	// unused images are removed, least recently used first, until usage is
	// ImageGCLowThresholdPercent. Defaults 85 and 80, as the kubelet's.
	ImageGCHighThresholdPercent, ImageGCLowThresholdPercent int
	// ImageMinimumGCAge is how long an unused image is kept at least.
	// Default 2m, as the kubelet's.
	ImageMinimumGCAge time.Duration

	// TerminateOnExit stops every pod gracefully when Run's context ends,
	// before Run returns. Default false: pods are left running, as when the
	// kubelet restarts.
	TerminateOnExit bool
	// ShutdownTimeout bounds the graceful stop of TerminateOnExit. Default
	// 1m.
	ShutdownTimeout time.Duration

	// Recorder receives events about pods and manifests. Optional.
	Recorder podconfig.EventRecorder
	// Clock drives every timer. Default the real clock; tests use
	// k8s.io/utils/clock/testing's FakeClock.
	Clock Clock
	// Jitter returns d plus up to maxFactor*d: the jitter of pod resyncs,
	// retries and probe start. Default wait.Jitter (math/rand); a
	// simulation passes a seeded one to be reproducible.
	Jitter func(d time.Duration, maxFactor float64) time.Duration
	// Log receives the agent's logs. Default logr.Discard().
	Log logr.Logger
	// Registerer, if set, receives the kubelet's metrics of the agent's
	// parts: the PLEG's (kubelet_pleg_*, kubelet_running_pods,
	// kubelet_running_containers), the pod workers'
	// (kubelet_pod_worker_duration_seconds, kubelet_restarted_pods_total)
	// and the agent's own (kubelet_node_name, kubelet_started_pods_total,
	// kubelet_started_containers_total, their _errors_total,
	// kubelet_pod_start_duration_seconds,
	// kubelet_pod_start_sli_duration_seconds; with Node, the
	// kubelet_node_startup_*_duration_seconds gauges). Runtime operations are the
	// runtime's to measure (cri.MetricsDialOptions). nil: no metrics.
	Registerer prometheus.Registerer
	// ProbeRegisterer, if set, receives the kubelet's prober metrics
	// (prober_probe_total, prober_probe_duration_seconds), which the
	// kubelet serves apart, on /metrics/probes. nil: none.
	ProbeRegisterer prometheus.Registerer
}

func (c *Config) setDefaults() error {
	if c.NodeName == "" {
		return fmt.Errorf("%w: NodeName is required", ErrInvalidConfig)
	}
	if c.Runtime == nil {
		return fmt.Errorf("%w: Runtime is required", ErrInvalidConfig)
	}
	for _, d := range []time.Duration{c.FileCheckFrequency, c.HTTPCheckFrequency, c.SyncFrequency, c.SyncErrorBackOff,
		c.RelistPeriod, c.StreamingRelistPeriod, c.RuntimeCheckPeriod, c.RuntimeDownAfter, c.CrashLoopBackOffInitial, c.CrashLoopBackOffMax, c.ShutdownTimeout, c.FirstStatusDelay} {
		if d < 0 {
			return fmt.Errorf("%w: negative duration %v", ErrInvalidConfig, d)
		}
	}
	if c.Node != nil && c.Node.Nodes == nil {
		return fmt.Errorf("%w: Node.Nodes is required with Node", ErrInvalidConfig)
	}
	if c.MaxPods < 0 {
		return fmt.Errorf("%w: negative MaxPods", ErrInvalidConfig)
	}
	if c.StatusSyncWorkers < 0 {
		return fmt.Errorf("%w: negative StatusSyncWorkers", ErrInvalidConfig)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.FileCheckFrequency, 20*time.Second)
	def(&c.HTTPCheckFrequency, 20*time.Second)
	def(&c.SyncFrequency, time.Minute)
	def(&c.SyncErrorBackOff, 10*time.Second)
	def(&c.RelistPeriod, time.Second)
	def(&c.RuntimeDownAfter, 30*time.Second)
	def(&c.RuntimeCheckPeriod, 5*time.Second)
	def(&c.CrashLoopBackOffInitial, 10*time.Second)
	def(&c.CrashLoopBackOffMax, 300*time.Second)
	def(&c.ShutdownTimeout, time.Minute)
	if c.CrashLoopBackOffMax < c.CrashLoopBackOffInitial {
		return fmt.Errorf("%w: CrashLoopBackOffMax below CrashLoopBackOffInitial", ErrInvalidConfig)
	}
	if c.MaxPods == 0 {
		c.MaxPods = defaultMaxPods
	}
	if c.PLEGEventCapacity < 0 {
		return fmt.Errorf("%w: negative PLEGEventCapacity", ErrInvalidConfig)
	}
	if c.PLEGEventCapacity == 0 {
		c.PLEGEventCapacity = max(1000, 4*c.MaxPods)
	}
	if c.ContainerGCPolicy == nil {
		p := DefaultContainerGCPolicy()
		c.ContainerGCPolicy = &p
	}
	def(&c.ContainerGCPeriod, DefaultContainerGCPeriod)
	def(&c.ImageGCPeriod, DefaultImageGCPeriod)
	def(&c.ImageMinimumGCAge, DefaultImageMinimumGCAge)
	if c.ImageGCHighThresholdPercent == 0 {
		c.ImageGCHighThresholdPercent = DefaultImageGCHighThreshold
	}
	if c.ImageGCLowThresholdPercent == 0 {
		c.ImageGCLowThresholdPercent = DefaultImageGCLowThreshold
	}
	if h, l := c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent; h < 0 || h > 100 || l < 0 || l > h {
		return fmt.Errorf("%w: image GC thresholds high %d, low %d: want 0 <= low <= high <= 100", ErrInvalidConfig, h, l)
	}
	if _, err := admission.Sysctls(c.AllowedUnsafeSysctls); err != nil {
		return fmt.Errorf("%w: AllowedUnsafeSysctls: %v", ErrInvalidConfig, err)
	}
	if c.AdmitHandlers == nil {
		c.AdmitHandlers = DefaultAdmitHandlers(*c)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return nil
}

// defaultMaxPods is the kubelet's max-pods; DefaultAdmitHandlers applies it
// too, since it may be called with a Config not yet defaulted.
const defaultMaxPods = 110

// DefaultAdmitHandlers returns the built-in admit handlers of c, in the
// order the agent runs them: MaxPods (110 if unset; not with
// IgnoreCapacity), then, if set,
// DenyHostNamespaces and DenyPrivileged, then admission.Sysctls with the
// running kernel's safe sysctls and AllowedUnsafeSysctls (which, invalid,
// refuse every pod setting a sysctl). The Node's checks are not among
// them (the Node is known only once New built its controller): with
// AdmitHandlers nil and a Node the agent appends
// admission.GeneralPredicatesWithPreemption itself, which checks the pods
// capacity in MaxPods' stead; a list of one's own adds
// admission.GeneralPredicatesOrInitial with funcs that return
// Agent.Node().SharedNode() and Agent.Node().InitialNode(ctx) once New has
// returned.
func DefaultAdmitHandlers(c Config) []admission.PodAdmitHandler {
	return defaultAdmitHandlers(c, !c.IgnoreCapacity)
}

// defaultAdmitHandlers is DefaultAdmitHandlers, MaxPods left out unless
// withMaxPods.
func defaultAdmitHandlers(c Config, withMaxPods bool) []admission.PodAdmitHandler {
	var hs []admission.PodAdmitHandler
	if withMaxPods {
		maxPods := c.MaxPods
		if maxPods == 0 {
			maxPods = defaultMaxPods
		}
		hs = append(hs, admission.MaxPods(maxPods))
	}
	if c.DenyHostNamespaces {
		hs = append(hs, admission.DenyHostNamespaces())
	}
	if c.DenyPrivileged {
		hs = append(hs, admission.DenyPrivileged())
	}
	return append(hs, sysctlsHandler(c.AllowedUnsafeSysctls))
}

// sysctlsHandler is the kubelet's sysctl allowlist: the running kernel's
// safe sysctls and the unsafe ones allowed. An invalid list (which New
// refuses) refuses pods that set sysctls rather than admitting them all.
func sysctlsHandler(unsafe []string) admission.PodAdmitHandler {
	kernel, _ := admission.KernelVersion() // unreadable: the safe sysctls of any kernel
	h, err := admission.Sysctls(append(admission.SafeSysctls(kernel), unsafe...))
	if err == nil {
		return h
	}
	return admission.PodAdmitHandlerFunc(func(attrs *admission.PodAdmitAttributes) admission.PodAdmitResult {
		if sc := attrs.Pod.Spec.SecurityContext; sc != nil && len(sc.Sysctls) > 0 {
			return admission.PodAdmitResult{Reason: admission.ReasonSysctlForbidden, Message: "forbidden sysctl: the node's allowed sysctls are invalid: " + err.Error()}
		}
		return admission.PodAdmitResult{Admit: true}
	})
}
