package dns

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's limits (k8s.io/kubernetes pkg/apis/core/validation, with
// the expanded DNS config that is GA since 1.28).
const (
	MaxNameservers     = 3
	MaxSearchPaths     = 32
	MaxSearchListChars = 2048
	// maxSearchPathChars drops longer domains: some resolvers (glibc 2.28)
	// abort on them.
	maxSearchPathChars = validation.DNS1123SubdomainMaxLength
)

// Event reasons, as the kubelet's.
const (
	ReasonDNSConfigForming         = "DNSConfigForming"
	ReasonMissingClusterDNS        = "MissingClusterDNS"
	ReasonCheckLimitsForResolvConf = "CheckLimitsForResolvConf"
)

// ErrInvalidConfig is wrapped by New's errors.
var ErrInvalidConfig = errors.New("dns: invalid config")

// EventRecorder records an event about an object; client-go's
// record.EventRecorder satisfies it.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Config configures a Configurer. Every field is optional.
type Config struct {
	// ClusterDNS are the cluster DNS servers' IPs (the kubelet's
	// --cluster-dns). Empty: ClusterFirst pods fall back to Default with a
	// MissingClusterDNS event.
	ClusterDNS []string
	// ClusterDomain is the cluster's DNS domain (--cluster-domain, usually
	// "cluster.local"). Empty: ClusterFirst pods get the host's search path
	// only.
	ClusterDomain string
	// ResolvConf is the host's resolver file that Default pods copy and
	// ClusterFirst pods take search domains from (--resolv-conf; the
	// kubelet's flag defaults to /etc/resolv.conf). Empty: no host file;
	// Default pods get the local resolver (127.0.0.1, or ::1 on an IPv6
	// node) and the search path ".".
	ResolvConf string
	// NodeIPs are the node's addresses, used only without ResolvConf: the
	// local resolver's address is given in each one's family.
	NodeIPs []string
	// NodeName names the node in events about the node.
	NodeName string
	// Recorder receives the kubelet's warning events. Default: none.
	Recorder EventRecorder
	// Log receives logs. Default logr.Discard().
	Log logr.Logger
}

// Configurer computes pods' DNS configurations. It is safe for concurrent
// use; it reads ResolvConf on every call, as the kubelet does, so a changed
// host file applies to new sandboxes.
type Configurer struct {
	cfg        Config
	clusterDNS []string
	nodeRef    *v1.ObjectReference
	loopbacks  []string
	log        logr.Logger
}

// New validates c and returns a Configurer.
func New(c Config) (*Configurer, error) {
	cf := &Configurer{cfg: c, log: c.Log}
	if cf.log.GetSink() == nil {
		cf.log = logr.Discard()
	}
	for _, s := range c.ClusterDNS {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%w: ClusterDNS %q is not an IP address", ErrInvalidConfig, s)
		}
		cf.clusterDNS = append(cf.clusterDNS, ip.String())
	}
	if d := c.ClusterDomain; d != "" {
		if errs := validation.IsDNS1123Subdomain(strings.TrimSuffix(d, ".")); len(errs) > 0 {
			return nil, fmt.Errorf("%w: ClusterDomain %q: %s", ErrInvalidConfig, d, strings.Join(errs, "; "))
		}
	}
	for _, s := range c.NodeIPs {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%w: NodeIPs: %q is not an IP address", ErrInvalidConfig, s)
		}
		if ip.Is4() || ip.Is4In6() {
			cf.loopbacks = append(cf.loopbacks, "127.0.0.1")
		} else {
			cf.loopbacks = append(cf.loopbacks, "::1")
		}
	}
	if len(cf.loopbacks) == 0 {
		cf.loopbacks = []string{"127.0.0.1"}
	}
	cf.loopbacks = omitDuplicates(cf.loopbacks)
	cf.nodeRef = &v1.ObjectReference{Kind: "Node", Name: c.NodeName, UID: types.UID(c.NodeName)}
	return cf, nil
}

// ClusterDomain is Config.ClusterDomain, which the CRI runtime manager
// also needs: pods with a subdomain have their FQDN in their hosts file and,
// with setHostnameAsFQDN, as their hostname.
func (c *Configurer) ClusterDomain() string { return c.cfg.ClusterDomain }

func (c *Configurer) event(obj runtime.Object, reason, format string, args ...any) {
	if c.cfg.Recorder != nil {
		c.cfg.Recorder.Eventf(obj, v1.EventTypeWarning, reason, format, args...)
	}
}

type dnsType int

const (
	dnsCluster dnsType = iota
	dnsHost
	dnsNone
)

func (c *Configurer) podDNSType(pod *v1.Pod) dnsType {
	switch pod.Spec.DNSPolicy {
	case v1.DNSNone:
		return dnsNone
	case v1.DNSClusterFirstWithHostNet:
		return dnsCluster
	case v1.DNSClusterFirst, "":
		// "" is what defaulting turns into ClusterFirst.
		if !pod.Spec.HostNetwork {
			return dnsCluster
		}
		return dnsHost // the kubelet's fallback for host-network pods
	case v1.DNSDefault:
		return dnsHost
	}
	c.log.Info("Invalid dnsPolicy, using ClusterFirst", "pod", klogRef(pod), "dnsPolicy", pod.Spec.DNSPolicy)
	return dnsCluster
}

func klogRef(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// PodDNS returns the DNS configuration of pod's sandbox. It fails when the
// host's resolv.conf cannot be read or parsed. Limits that trim the result
// are reported as DNSConfigForming events on the pod.
func (c *Configurer) PodDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	host, err := c.hostDNS()
	if err != nil {
		return nil, err
	}
	out := host
	switch c.podDNSType(pod) {
	case dnsNone:
		out = &runtimeapi.DNSConfig{}
	case dnsCluster:
		if len(c.clusterDNS) > 0 {
			// The cluster DNS is the only nameserver: it forwards what it
			// cannot answer itself.
			out.Servers = append([]string(nil), c.clusterDNS...)
			out.Searches = c.clusterSearches(host.Searches, pod.Namespace)
			out.Options = []string{"ndots:5"}
			break
		}
		msg := fmt.Sprintf("kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.",
			v1.DNSClusterFirst, v1.DNSDefault)
		c.event(c.nodeRef, ReasonMissingClusterDNS, "%s", msg)
		c.event(pod, ReasonMissingClusterDNS, "pod: %q. %s", pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")", msg)
		c.hostFallback(out)
	case dnsHost:
		c.hostFallback(out)
	}
	if d := pod.Spec.DNSConfig; d != nil {
		out.Servers = omitDuplicates(append(out.Servers, d.Nameservers...))
		out.Searches = omitDuplicates(append(out.Searches, d.Searches...))
		out.Options = mergeOptions(out.Options, d.Options)
	}
	c.fitLimits(out, pod)
	return out, nil
}

// hostFallback turns an empty ResolvConf into the local resolver, as the
// kubelet does for --resolv-conf="".
func (c *Configurer) hostFallback(out *runtimeapi.DNSConfig) {
	if c.cfg.ResolvConf != "" {
		return
	}
	out.Servers = append([]string(nil), c.loopbacks...)
	out.Searches = []string{"."}
}

func (c *Configurer) hostDNS() (*runtimeapi.DNSConfig, error) {
	if c.cfg.ResolvConf == "" {
		return &runtimeapi.DNSConfig{}, nil
	}
	f, err := os.ReadFile(c.cfg.ResolvConf)
	if err != nil {
		return nil, fmt.Errorf("dns: reading host resolv.conf: %w", err)
	}
	rc, err := ParseResolvConf(f)
	if err != nil {
		return nil, fmt.Errorf("dns: host resolv.conf %s: %w", c.cfg.ResolvConf, err)
	}
	return rc, nil
}

func (c *Configurer) clusterSearches(host []string, namespace string) []string {
	d := strings.TrimSuffix(c.cfg.ClusterDomain, ".")
	if d == "" {
		return host
	}
	s := make([]string, 0, 3+len(host))
	s = append(s, namespace+".svc."+d, "svc."+d, d)
	return omitDuplicates(append(s, host...))
}

func (c *Configurer) fitLimits(cfg *runtimeapi.DNSConfig, pod *v1.Pod) {
	if len(cfg.Servers) > MaxNameservers {
		cfg.Servers = cfg.Servers[:MaxNameservers]
		msg := "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " + strings.Join(cfg.Servers, " ")
		c.event(pod, ReasonDNSConfigForming, "%s", msg)
		c.log.Info(msg, "pod", klogRef(pod))
	}
	s, cut := fitSearches(cfg.Searches)
	cfg.Searches = s
	if cut {
		msg := "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(s, " ")
		c.event(pod, ReasonDNSConfigForming, "%s", msg)
		c.log.Info(msg, "pod", klogRef(pod))
	}
}

// fitSearches cuts s to the kubelet's limits: at most MaxSearchPaths
// domains, none longer than 253 characters, the line at most
// MaxSearchListChars (cut from the end).
func fitSearches(s []string) ([]string, bool) {
	cut := false
	if len(s) > MaxSearchPaths {
		s, cut = s[:MaxSearchPaths], true
	}
	kept := s[:0]
	for _, d := range s {
		if len(d) > maxSearchPathChars {
			cut = true
			continue
		}
		kept = append(kept, d)
	}
	s = kept
	line := len(s) - 1 // spaces
	for _, d := range s {
		line += len(d)
	}
	for len(s) > 0 && line > MaxSearchListChars {
		line -= len(s[len(s)-1]) + 1
		s, cut = s[:len(s)-1], true
	}
	return s, cut
}

// CheckLimitsForResolvConf checks the host's resolv.conf against the limits
// once the cluster's search domains are added, and reports a problem as a
// CheckLimitsForResolvConf warning event on the node, as the kubelet does at
// start. It returns the problem too (nil when none or no ResolvConf).
func (c *Configurer) CheckLimitsForResolvConf() error {
	if c.cfg.ResolvConf == "" {
		return nil
	}
	err := c.checkResolvConf()
	if err != nil {
		c.event(c.nodeRef, ReasonCheckLimitsForResolvConf, "%s", err.Error())
		c.log.V(1).Info("Check limits for resolv.conf failed", "err", err)
	}
	return err
}

func (c *Configurer) checkResolvConf() error {
	host, err := c.hostDNS()
	if err != nil {
		return err
	}
	limit := MaxSearchPaths
	if c.cfg.ClusterDomain != "" {
		limit -= 3
	}
	if len(host.Searches) > limit {
		return fmt.Errorf("Resolv.conf file '%s' contains search line consisting of more than %d domains!", c.cfg.ResolvConf, limit) //nolint:staticcheck // the kubelet's message
	}
	for _, s := range host.Searches {
		if len(s) > maxSearchPathChars {
			return fmt.Errorf("Resolv.conf file %q contains a search path which length is more than allowed %d chars!", c.cfg.ResolvConf, maxSearchPathChars) //nolint:staticcheck // the kubelet's message
		}
	}
	if len(strings.Join(host.Searches, " ")) > MaxSearchListChars {
		return fmt.Errorf("Resolv.conf file '%s' contains search line which length is more than allowed %d chars!", c.cfg.ResolvConf, MaxSearchListChars) //nolint:staticcheck // the kubelet's message
	}
	return nil
}

func omitDuplicates(s []string) []string {
	if len(s) < 2 {
		return s
	}
	seen := make(map[string]struct{}, len(s))
	out := s[:0]
	for _, v := range s {
		if _, dup := seen[v]; dup {
			continue
		}
		seen[v] = struct{}{}
		out = append(out, v)
	}
	return out
}

// mergeOptions overrides existing options ("name" or "name:value") by name
// with the pod's, keeping their order; new names go last.
func mergeOptions(existing []string, pod []v1.PodDNSConfigOption) []string {
	out := append([]string(nil), existing...)
	for _, o := range pod {
		opt := o.Name
		if o.Value != nil && *o.Value != "" {
			opt += ":" + *o.Value
		}
		out = overrideOption(out, opt)
	}
	return omitDuplicates(out)
}

// overrideOption replaces the options of opt's name in opts with opt, or
// appends it.
func overrideOption(opts []string, opt string) []string {
	name := func(o string) string {
		if i := strings.IndexByte(o, ':'); i >= 0 {
			return o[:i]
		}
		return o
	}
	replaced := false
	for i := range opts {
		if name(opts[i]) == name(opt) {
			opts[i], replaced = opt, true
		}
	}
	if !replaced {
		opts = append(opts, opt)
	}
	return opts
}
