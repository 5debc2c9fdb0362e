package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/lifecycle"
	"github.com/nodekit/nodekit/volume"
)

// ErrRuntimeUnavailable is returned by New when the runtime does not answer
// at its endpoint. The caller may retry later.
var ErrRuntimeUnavailable = errors.New("cri: container runtime is not answering")

// Config configures a Manager. Only Endpoint is required.
type Config struct {
	// Endpoint is the CRI runtime socket, "unix:///run/containerd/containerd.sock".
	// An absolute path is taken as a unix socket.
	Endpoint string
	// ImageEndpoint is the image service socket. Default: Endpoint.
	ImageEndpoint string
	// CallTimeout bounds each CRI call (the kubelet's runtime-request-timeout).
	// RunPodSandbox gets twice as long and StopContainer the grace period on
	// top; image pulls are bounded by the caller's context only. Default 2m.
	CallTimeout time.Duration
	// MaxMsgSize bounds gRPC messages in both directions. Default 16 MiB.
	MaxMsgSize int
	// RuntimeHandler selects the runtime class handler for sandboxes.
	// Default: the runtime's default handler.
	RuntimeHandler string
	// PodLogsRoot is the root of the pod log directories (the kubelet's
	// /var/log/pods). Container logs go to
	// <PodLogsRoot>/<namespace>_<name>_<uid>/<container>/<restartCount>.log.
	// Default /var/log/pods.
	PodLogsRoot string
	// ContainerLogMaxSize is the size in bytes at which a running
	// container's log file is rotated (the kubelet's containerLogMaxSize).
	// Default 10 MiB; negative: logs are never rotated. Rotation runs in
	// LogManager().Run.
	ContainerLogMaxSize int64
	// ContainerLogMaxFiles is how many log files a container keeps, the
	// live one and its rotated (gzipped) ones. Default 5; at least 2.
	ContainerLogMaxFiles int
	// ContainerLogMaxWorkers rotates that many containers' logs at once.
	// Default 1.
	ContainerLogMaxWorkers int
	// ContainerLogMonitorInterval is how often log sizes are checked.
	// Default 10s.
	ContainerLogMonitorInterval time.Duration
	// PodsRoot holds per-pod state on the host (the kubelet's
	// /var/lib/kubelet/pods): emptyDir volumes under
	// <uid>/volumes/kubernetes.io~empty-dir/<name> and termination-message
	// files under <uid>/containers/<name>/. Default /var/lib/nodekit/pods.
	PodsRoot string
	// HostsFile is the node's hosts file, which containers of pods on the
	// host's network see (with the pods' hostAliases added) at /etc/hosts;
	// pods on the pod network get one of their own, as from the kubelet.
	// Default /etc/hosts.
	HostsFile string
	// DenyPrivileged refuses privileged containers: a pod asking for one
	// gets CreateContainerConfigError and nothing of it is started. Default
	// false: they run, as with the kubelet, which no longer has
	// allow-privileged.
	DenyPrivileged bool
	// RegistryPullQPS and RegistryBurst limit image pulls with a token
	// bucket (the kubelet's registry_qps and registry_burst); a pull over
	// the limit fails at once with ErrImagePull. Defaults 5 and 10; a
	// negative RegistryPullQPS means no limit.
	RegistryPullQPS float64
	RegistryBurst   int
	// MaxParallelImagePulls bounds concurrent pulls. Default 1: pulls are
	// serialized, as with the kubelet's serialize_image_pulls.
	MaxParallelImagePulls int
	// ImagePullBackoff delays pulls of an image that failed, per pod and
	// image. Default 10s doubling up to 300s.
	ImagePullBackoff *runtime.Backoff
	// CrashLoopBackoff is used by SyncPod when its caller passes no back-off.
	// Default 10s doubling up to 300s.
	CrashLoopBackoff *runtime.Backoff
	// DNS computes each sandbox's resolver configuration from the pod's
	// dnsPolicy and dnsConfig, as the kubelet's (see package
	// github.com/nodekit/nodekit/dns). Default: only the pod's
	// spec.dnsConfig is passed on.
	DNS DNSConfigurer
	// Env builds containers' environments. Default: podenv's resolver
	// without API sources, so configMap and secret references fail with
	// CreateContainerConfigError; pass a podenv.Resolver over an
	// objects.Cache for pods from an apiserver.
	Env EnvResolver
	// Volumes sets up pods' volumes under PodsRoot. Default: a
	// volume.Manager without API sources (hostPath and emptyDir work,
	// configMap, secret and token volumes fail with
	// CreateContainerConfigError); pass one over an objects.Cache and
	// objects.Tokens for pods from an apiserver. Its PodsRoot must be
	// PodsRoot.
	Volumes VolumeManager
	// PodCgroups places each pod in the kubelet's QoS cgroup hierarchy
	// with its pod-level limits (see package github.com/nodekit/nodekit/cm):
	// the sandbox's cgroup parent, made before the sandbox, removed by
	// KillPod. Default: none, the runtime's default parent. SetPodCgroups
	// sets it after New.
	PodCgroups PodCgroups
	// Recorder receives the kubelet's runtime-manager events about pods
	// and their containers: Pulling, Pulled, Failed, BackOff, Created,
	// Started, Killing, FailedPostStartHook, FailedPreStopHook,
	// SandboxChanged, FailedCreatePodSandBox. Default: none are recorded.
	Recorder runtime.EventRecorder
	// DialOptions are added to the manager's own when dialing, for example
	// a unary interceptor for metrics or tracing.
	DialOptions []grpc.DialOption
	// Clock is the time source. Default: the real clock.
	Clock clock.Clock
	// Log receives the manager's logs. Default: logr.Discard().
	Log logr.Logger
}

// Manager implements runtime.Runtime over a CRI runtime. It is safe for
// concurrent use.
type Manager struct {
	cfg     Config
	conns   []*grpc.ClientConn
	rt      runtimeapi.RuntimeServiceClient
	img     runtimeapi.ImageServiceClient
	clock   clock.Clock
	log     logr.Logger
	name    string
	version string
	images  *puller
	logs    *ContainerLogManager
	hooks   *lifecycle.Runner

	// killed holds the pods KillPod stopped since their last SyncPod, which
	// GarbageCollect may remove.
	killedMu sync.Mutex
	killed   map[types.UID]struct{}

	// memo keeps the statuses that no longer change (see statusMemo).
	memo *statusMemo
	// lists decodes the full listings against the last ones.
	lists *listCodec

	podCgroups atomic.Pointer[PodCgroups]
	// creating counts sandboxes being made per pod (see sweepPodCgroups).
	creatingMu sync.Mutex
	creating   map[types.UID]int

	// noSandboxStats: the runtime answered ListPodSandboxStats
	// Unimplemented; ListPodStats no longer asks.
	noSandboxStats atomic.Bool
}

var (
	_ runtime.Runtime      = (*Manager)(nil)
	_ runtime.ImageService = (*Manager)(nil)
	_ runtime.EventSource  = (*Manager)(nil)
)

// New connects to the runtime at c.Endpoint and checks that it answers the
// runtime/v1 API. A runtime that is down gives an error wrapping
// ErrRuntimeUnavailable; bad configuration one wrapping
// runtime.ErrInvalidConfig. Close the Manager when done.
func New(ctx context.Context, c Config) (*Manager, error) {
	if err := setDefaults(&c); err != nil {
		return nil, err
	}
	m := &Manager{cfg: c, clock: c.Clock, log: c.Log, killed: map[types.UID]struct{}{}, memo: newStatusMemo(), lists: newListCodec()}
	if c.PodCgroups != nil {
		m.SetPodCgroups(c.PodCgroups)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.MaxMsgSize), grpc.MaxCallSendMsgSize(c.MaxMsgSize)),
		// The kubelet's reconnect back-off (100 ms to 3 s): with gRPC's
		// default (up to 120 s) a runtime back from a 30 s crash would
		// stay unreached for another 15 s or more.
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 5 * time.Second,
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second}}),
	}
	opts = append(opts, c.DialOptions...)
	conn, err := grpc.NewClient(c.Endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("cri: Endpoint %q: %v: %w", c.Endpoint, err, runtime.ErrInvalidConfig)
	}
	m.conns = append(m.conns, conn)
	m.rt = runtimeapi.NewRuntimeServiceClient(conn)
	m.img = runtimeapi.NewImageServiceClient(conn)
	if c.ImageEndpoint != c.Endpoint {
		iconn, err := grpc.NewClient(c.ImageEndpoint, opts...)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("cri: ImageEndpoint %q: %v: %w", c.ImageEndpoint, err, runtime.ErrInvalidConfig)
		}
		m.conns = append(m.conns, iconn)
		m.img = runtimeapi.NewImageServiceClient(iconn)
	}
	cctx, cancel := context.WithTimeout(ctx, c.CallTimeout)
	defer cancel()
	v, err := m.rt.Version(cctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil {
		m.Close()
		if status.Code(err) == codes.Unimplemented {
			return nil, fmt.Errorf("cri: runtime at %s does not serve the runtime/v1 API: %w", c.Endpoint, runtime.ErrNotSupported)
		}
		return nil, fmt.Errorf("cri: %w at %s: %v", ErrRuntimeUnavailable, c.Endpoint, err)
	}
	if strings.HasPrefix(v.RuntimeApiVersion, "v1alpha") {
		m.Close()
		return nil, fmt.Errorf("cri: runtime at %s speaks CRI %q, want v1: %w", c.Endpoint, v.RuntimeApiVersion, runtime.ErrNotSupported)
	}
	if c.ImageEndpoint != c.Endpoint {
		if _, err := m.img.ImageFsInfo(cctx, &runtimeapi.ImageFsInfoRequest{}); err != nil && status.Code(err) == codes.Unavailable {
			m.Close()
			return nil, fmt.Errorf("cri: image service %w at %s: %v", ErrRuntimeUnavailable, c.ImageEndpoint, err)
		}
	}
	m.name, m.version = v.RuntimeName, v.RuntimeVersion
	if m.name == "" {
		m.name = "cri"
	}
	m.images = newPuller(c, m.img)
	m.logs = newContainerLogManager(m.rt, c)
	m.hooks = lifecycle.New(lifecycle.Config{Exec: m, PodIP: m.podIP, Clock: c.Clock, Recorder: c.Recorder, Log: c.Log.WithName("hooks")})
	m.log.V(1).Info("connected to CRI runtime", "endpoint", c.Endpoint, "runtime", m.name, "version", m.version)
	return m, nil
}

func setDefaults(c *Config) error {
	if c.Endpoint == "" {
		return fmt.Errorf("cri: Endpoint is required: %w", runtime.ErrInvalidConfig)
	}
	var err error
	if c.Endpoint, err = normalizeEndpoint(c.Endpoint); err != nil {
		return err
	}
	if c.ImageEndpoint == "" {
		c.ImageEndpoint = c.Endpoint
	} else if c.ImageEndpoint, err = normalizeEndpoint(c.ImageEndpoint); err != nil {
		return err
	}
	if c.CallTimeout < 0 || c.MaxMsgSize < 0 || c.RegistryBurst < 0 || c.MaxParallelImagePulls < 0 {
		return fmt.Errorf("cri: negative CallTimeout, MaxMsgSize, RegistryBurst or MaxParallelImagePulls: %w", runtime.ErrInvalidConfig)
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 2 * time.Minute
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = 16 << 20
	}
	if c.PodLogsRoot == "" {
		c.PodLogsRoot = "/var/log/pods"
	}
	if c.HostsFile == "" {
		c.HostsFile = etcHostsPath
	}
	if c.PodsRoot == "" {
		c.PodsRoot = "/var/lib/nodekit/pods"
	}
	if c.RegistryPullQPS == 0 {
		c.RegistryPullQPS = 5
	}
	if c.RegistryBurst == 0 {
		c.RegistryBurst = 10
	}
	if c.MaxParallelImagePulls == 0 {
		c.MaxParallelImagePulls = 1
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if err := logRotationDefaults(c); err != nil {
		return fmt.Errorf("%w: %w", err, runtime.ErrInvalidConfig)
	}
	if c.Volumes == nil {
		v, err := volume.New(volume.Config{PodsRoot: c.PodsRoot, Clock: c.Clock, Log: c.Log})
		if err != nil {
			return fmt.Errorf("cri: volumes: %v: %w", err, runtime.ErrInvalidConfig)
		}
		c.Volumes = v
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	if c.ImagePullBackoff == nil {
		c.ImagePullBackoff = runtime.NewBackoff(10*time.Second, 300*time.Second, 0, c.Clock)
	}
	if c.CrashLoopBackoff == nil {
		c.CrashLoopBackoff = runtime.NewBackoff(10*time.Second, 300*time.Second, 0, c.Clock)
	}
	return nil
}

func normalizeEndpoint(e string) (string, error) {
	switch {
	case strings.HasPrefix(e, "unix://") && len(e) > len("unix://"):
		return e, nil
	case strings.HasPrefix(e, "/"):
		return "unix://" + e, nil
	}
	return "", fmt.Errorf("cri: endpoint %q: want unix:///path/to.sock: %w", e, runtime.ErrInvalidConfig)
}

// Close closes the connections to the runtime.
func (m *Manager) Close() error {
	var errs []error
	for _, c := range m.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Type returns the runtime's name as it reported it ("containerd").
func (m *Manager) Type() string { return m.name }

// Version returns the runtime's version.
func (m *Manager) Version(ctx context.Context) (string, error) {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	v, err := m.rt.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil {
		return "", wrapErr("Version", err)
	}
	return v.RuntimeVersion, nil
}

// Status reports the runtime's conditions.
func (m *Manager) Status(ctx context.Context) (*runtime.RuntimeStatus, error) {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	resp, err := m.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return nil, wrapErr("Status", err)
	}
	st := &runtime.RuntimeStatus{}
	for _, c := range resp.GetStatus().GetConditions() {
		st.Conditions = append(st.Conditions, runtime.RuntimeCondition{
			Type: runtime.RuntimeConditionType(c.Type), Status: c.Status, Reason: c.Reason, Message: c.Message,
		})
	}
	return st, nil
}

// callCtx bounds one call: CallTimeout plus extra.
func (m *Manager) callCtx(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.cfg.CallTimeout+extra)
}

// wrapErr maps gRPC codes to the runtime package's sentinels at the edge:
// Unimplemented is "not supported" (containerd 1.6 lacks some calls), never
// a failure to retry; NotFound is runtime.ErrNotFound.
func wrapErr(op string, err error) error {
	switch status.Code(err) {
	case codes.Unimplemented:
		return fmt.Errorf("cri %s: %w: %v", op, runtime.ErrNotSupported, status.Convert(err).Message())
	case codes.NotFound:
		return fmt.Errorf("cri %s: %w: %v", op, runtime.ErrNotFound, status.Convert(err).Message())
	}
	return fmt.Errorf("cri %s: %w", op, err)
}
