package nodeflags

import (
	"flag"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/agent"
)

// Pods are the kubelet's flags for where static pods come from, how often
// pods are synced and which pods are admitted.
type Pods struct {
	ManifestPath, ManifestURL string
	Header                    HeaderFlag
	SyncFrequency             time.Duration
	FileCheck, HTTPCheck      time.Duration
	AllowPrivileged           bool
	AllowHostNamespaces       bool
	MaxPods                   int
	EventedPLEG               bool
	RelistOnRequest           bool
	// AllowedUnsafeSysctls is -allowed-unsafe-sysctls, comma-separated.
	AllowedUnsafeSysctls string
}

// AddFlags defines -pod-manifest-path (default defaultManifestPath),
// -manifest-url, -manifest-url-header, -sync-frequency,
// -file-check-frequency, -http-check-frequency, -allow-privileged,
// -allow-host-namespaces, -allowed-unsafe-sysctls, -max-pods and
// -evented-pleg on fs.
func (p *Pods) AddFlags(fs *flag.FlagSet, defaultManifestPath string) {
	p.Header = HeaderFlag{}
	fs.StringVar(&p.ManifestPath, "pod-manifest-path", defaultManifestPath, "directory (or file) of static pod manifests, re-read on change; empty for none")
	fs.StringVar(&p.ManifestURL, "manifest-url", "", "URL serving static pod manifests, polled every -http-check-frequency")
	fs.Var(p.Header, "manifest-url-header", "HTTP header `key:value` sent to -manifest-url; repeatable, or comma-separated")
	fs.DurationVar(&p.SyncFrequency, "sync-frequency", time.Minute, "how often every pod is synced again without a change")
	fs.DurationVar(&p.FileCheck, "file-check-frequency", 20*time.Second, "how often -pod-manifest-path is re-read besides file notifications")
	fs.DurationVar(&p.HTTPCheck, "http-check-frequency", 20*time.Second, "how often -manifest-url is polled")
	fs.BoolVar(&p.AllowPrivileged, "allow-privileged", true, "admit pods with privileged containers; false rejects them")
	fs.BoolVar(&p.AllowHostNamespaces, "allow-host-namespaces", true, "admit pods using the host's network, PID or IPC namespace; false rejects them")
	fs.StringVar(&p.AllowedUnsafeSysctls, "allowed-unsafe-sysctls", "", "comma-separated unsafe sysctls or patterns (ending in *) pods may set besides the safe ones, e.g. 'kernel.msg*,net.core.somaxconn'; each must be namespaced (kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*, net.*). Pods setting others are rejected with SysctlForbidden")
	fs.IntVar(&p.MaxPods, "max-pods", 110, "how many pods may run (a Node's pods capacity); later ones are rejected with reason OutOfpods")
	fs.BoolVar(&p.RelistOnRequest, "relist-on-request", true, "relist at once after starting containers and when a pod worker waits for newer status, rather than at the next relist period as the kubelet (false: the kubelet's timing)")
	fs.BoolVar(&p.EventedPLEG, "evented-pleg", false, "learn of container changes from the runtime's event stream (containerd 2.x), relisting every 5m, as the kubelet's EventedPLEG feature gate; it shares that gate's known issue (kubernetes/kubernetes#123087: a dropped event can start a container twice)")
}

// Validate checks the flags; whether -pod-manifest-path exists is the
// caller's to check, with its own hint.
func (p *Pods) Validate() error {
	for name, d := range map[string]time.Duration{"-sync-frequency": p.SyncFrequency, "-file-check-frequency": p.FileCheck,
		"-http-check-frequency": p.HTTPCheck} {
		if d <= 0 {
			return fmt.Errorf("%w: %s must be positive, got %s", ErrUsage, name, d)
		}
	}
	if p.MaxPods <= 0 {
		return fmt.Errorf("%w: -max-pods must be positive, got %d", ErrUsage, p.MaxPods)
	}
	if _, err := admission.Sysctls(p.unsafeSysctls()); err != nil {
		return fmt.Errorf("%w: -allowed-unsafe-sysctls: %w", ErrUsage, err)
	}
	if len(p.Header) > 0 && p.ManifestURL == "" {
		return fmt.Errorf("%w: -manifest-url-header needs -manifest-url", ErrUsage)
	}
	return nil
}

// Apply sets c's pod source, sync and admission fields from the flags.
func (p *Pods) Apply(c *agent.Config) {
	c.StaticPodPath = p.ManifestPath
	c.FileCheckFrequency = p.FileCheck
	c.ManifestURL = p.ManifestURL
	if len(p.Header) > 0 {
		c.ManifestURLHeader = http.Header(p.Header)
	}
	c.HTTPCheckFrequency = p.HTTPCheck
	c.SyncFrequency = p.SyncFrequency
	c.MaxPods = p.MaxPods
	c.DenyPrivileged = !p.AllowPrivileged
	c.DenyHostNamespaces = !p.AllowHostNamespaces
	c.EventedPLEG = p.EventedPLEG
	c.RelistOnRequest = p.RelistOnRequest
	c.AllowedUnsafeSysctls = p.unsafeSysctls()
}

func (p *Pods) unsafeSysctls() []string {
	var out []string
	for _, s := range strings.Split(p.AllowedUnsafeSysctls, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
