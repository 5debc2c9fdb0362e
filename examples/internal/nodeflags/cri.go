package nodeflags

import (
	"context"
	"flag"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit/runtime/cri"
)

// CRI holds the flags of the container runtime: its endpoint (empty for the
// in-memory runtime), the pause image to pull, and where pod logs and pod
// state go.
type CRI struct {
	Endpoint, PauseImage  string
	PodLogsRoot, PodsRoot string
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

// AddFlags defines -cri, -pause-image, -pod-logs-root and -pods-root on fs.
func (c *CRI) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Endpoint, "cri", "", "CRI runtime endpoint, e.g. unix:///run/containerd/containerd.sock; empty for the in-memory runtime. Images must be on the node or pullable")
	fs.StringVar(&c.PauseImage, "pause-image", "", "with -cri: the sandbox image the runtime is configured with (containerd's sandbox_image); pulled at start if missing. The CRI runtime, not the agent, chooses it")
	fs.StringVar(&c.PodLogsRoot, "pod-logs-root", "/var/log/pods", "with -cri: root of the container log directories")
	fs.StringVar(&c.PodsRoot, "pods-root", "/var/lib/nodekit/pods", "with -cri: per-pod state (volumes, termination messages)")
}

// Validate checks the flags.
func (c *CRI) Validate() error {
	if c.PauseImage != "" && c.Endpoint == "" {
		return fmt.Errorf("%w: -pause-image needs -cri", ErrUsage)
	}
	return nil
}

// Open connects to the runtime at c.Endpoint with cfg (its Endpoint, roots,
// DNS and DenyPrivileged are filled in from c, dns and pods), sets up the QoS
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
