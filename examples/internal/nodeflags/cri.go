package nodeflags

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit/runtime/cri"
)

// CRI holds the flags of the container runtime: its endpoint (empty for the
// in-memory runtime), the pause image to pull, and where pod logs and pod
// state go.
type CRI struct {
	Endpoint, PauseImage  string
	PodLogsRoot, PodsRoot string
	// Container log rotation, the kubelet's flags: the size as a quantity
	// ("10Mi"; negative: no rotation), the files kept per container, the
	// workers and how often sizes are checked.
	ContainerLogMaxSize         string
	ContainerLogMaxFiles        int
	ContainerLogMaxWorkers      int
	ContainerLogMonitorInterval time.Duration
	// Recorder receives the DNS and cgroup managers' events and the
	// runtime manager's (Pulled, Created, Started, Killing...); nil logs
	// them.
	Recorder EventRecorder
}

// EventRecorder records an event about an object; client-go's
// record.EventRecorder and EventLog satisfy it.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// recorder is c.Recorder, or EventLog on log.
func (c *CRI) recorder(log logr.Logger) EventRecorder {
	if c.Recorder != nil {
		return c.Recorder
	}
	return EventLog{log.WithName("events")}
}

// AddFlags defines -cri, -pause-image, -pod-logs-root, -pods-root and the
// container log rotation flags on fs.
func (c *CRI) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Endpoint, "cri", "", "CRI runtime endpoint, e.g. unix:///run/containerd/containerd.sock; empty for the in-memory runtime. Images must be on the node or pullable")
	fs.StringVar(&c.PauseImage, "pause-image", "", "with -cri: the sandbox image the runtime is configured with (containerd's sandbox_image); pulled at start if missing. The CRI runtime, not the agent, chooses it")
	fs.StringVar(&c.PodLogsRoot, "pod-logs-root", "/var/log/pods", "with -cri: root of the container log directories")
	fs.StringVar(&c.PodsRoot, "pods-root", "/var/lib/nodekit/pods", "with -cri: per-pod state (volumes, termination messages)")
	fs.StringVar(&c.ContainerLogMaxSize, "container-log-max-size", "10Mi", "with -cri: size (a quantity, e.g. 10Mi) at which a running container's log is rotated; negative: never")
	fs.IntVar(&c.ContainerLogMaxFiles, "container-log-max-files", cri.DefaultContainerLogMaxFiles, "with -cri: log files kept per container, the live one included (at least 2)")
	fs.IntVar(&c.ContainerLogMaxWorkers, "container-log-max-workers", cri.DefaultContainerLogMaxWorkers, "with -cri: containers whose logs are rotated at once")
	fs.DurationVar(&c.ContainerLogMonitorInterval, "container-log-monitor-interval", cri.DefaultContainerLogMonitorInterval, "with -cri: how often container log sizes are checked")
}

// logMaxSize parses -container-log-max-size.
func (c *CRI) logMaxSize() (int64, error) {
	if c.ContainerLogMaxSize == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(c.ContainerLogMaxSize)
	if err != nil {
		return 0, fmt.Errorf("%w: -container-log-max-size %q: %v", ErrUsage, c.ContainerLogMaxSize, err)
	}
	n, ok := q.AsInt64()
	if !ok {
		return 0, fmt.Errorf("%w: -container-log-max-size %q: not a whole number of bytes", ErrUsage, c.ContainerLogMaxSize)
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: -container-log-max-size 0: want a size, or a negative one for no rotation", ErrUsage)
	}
	return n, nil
}

// Validate checks the flags.
func (c *CRI) Validate() error {
	if c.PauseImage != "" && c.Endpoint == "" {
		return fmt.Errorf("%w: -pause-image needs -cri", ErrUsage)
	}
	if _, err := c.logMaxSize(); err != nil {
		return err
	}
	switch {
	case c.ContainerLogMaxFiles < 2:
		return fmt.Errorf("%w: -container-log-max-files %d: at least 2", ErrUsage, c.ContainerLogMaxFiles)
	case c.ContainerLogMaxWorkers < 1:
		return fmt.Errorf("%w: -container-log-max-workers %d: at least 1", ErrUsage, c.ContainerLogMaxWorkers)
	case c.ContainerLogMonitorInterval <= 0:
		return fmt.Errorf("%w: -container-log-monitor-interval %v: must be positive", ErrUsage, c.ContainerLogMonitorInterval)
	}
	return nil
}

// Open connects to the runtime at c.Endpoint with cfg (its Endpoint, roots,
// log rotation, DNS and DenyPrivileged are filled in from c, dns and pods),
// sets up the QoS
// cgroups cg asks for and pulls the pause image if missing. On error nothing
// stays open.
func (c *CRI) Open(ctx context.Context, cfg cri.Config, pods *Pods, dns *DNS, cg *Cgroups, node string, log logr.Logger) (*cri.Manager, error) {
	rec := c.recorder(log)
	dnsc, err := dns.Configurer(node, rec, log)
	if err != nil {
		return nil, err
	}
	cfg.DNS = dnsc
	if cfg.Recorder == nil {
		cfg.Recorder = rec
	}
	cfg.Endpoint, cfg.PodLogsRoot, cfg.PodsRoot = c.Endpoint, c.PodLogsRoot, c.PodsRoot
	if cfg.ContainerLogMaxSize, err = c.logMaxSize(); err != nil {
		return nil, err
	}
	cfg.ContainerLogMaxFiles, cfg.ContainerLogMaxWorkers = c.ContainerLogMaxFiles, c.ContainerLogMaxWorkers
	cfg.ContainerLogMonitorInterval = c.ContainerLogMonitorInterval
	cfg.DenyPrivileged = !pods.AllowPrivileged
	cfg.Log = log.WithName("cri")
	m, err := cri.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("-cri %s: %w", c.Endpoint, err)
	}
	if err := cg.Setup(ctx, m, node, rec, log); err != nil {
		m.Close()
		return nil, err
	}
	if c.PauseImage != "" {
		if err := EnsureImage(ctx, m, c.PauseImage); err != nil {
			m.Close()
			return nil, fmt.Errorf("-pause-image: %w", err)
		}
	}
	return m, nil
}

// RunLogRotation runs m's container log rotation until ctx ends or stop is
// called; stop waits for it to end.
func RunLogRotation(ctx context.Context, m *cri.Manager) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.LogManager().Run(ctx)
	}()
	return func() { cancel(); <-done }
}
