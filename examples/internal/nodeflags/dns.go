package nodeflags

import (
	"flag"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit/dns"
)

// DNS are the kubelet's cluster DNS flags.
type DNS struct {
	clusterDNS    string
	clusterDomain string
	resolvConf    string
}

// AddFlags defines -cluster-dns, -cluster-domain and -resolv-conf on fs.
func (d *DNS) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&d.clusterDNS, "cluster-dns", "", "with -cri: comma-separated cluster DNS server IPs for pods with dnsPolicy ClusterFirst (without, they get the host's resolver)")
	fs.StringVar(&d.clusterDomain, "cluster-domain", "", "with -cri: the cluster's DNS domain, e.g. cluster.local; ClusterFirst pods search <ns>.svc.<domain> svc.<domain> <domain>")
	fs.StringVar(&d.resolvConf, "resolv-conf", "/etc/resolv.conf", "with -cri: the host resolver file pods with dnsPolicy Default copy; empty for the local resolver")
}

// Configurer builds the DNS configurer; its events go to rec.
func (d *DNS) Configurer(node string, rec EventRecorder, log logr.Logger) (*dns.Configurer, error) {
	var servers []string
	for _, s := range strings.Split(d.clusterDNS, ",") {
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	c, err := dns.New(dns.Config{ClusterDNS: servers, ClusterDomain: d.clusterDomain, ResolvConf: d.resolvConf,
		NodeName: node, Recorder: rec, Log: log.WithName("dns")})
	if err != nil {
		return nil, fmt.Errorf("%w: -cluster-dns, -cluster-domain: %w", ErrUsage, err)
	}
	_ = c.CheckLimitsForResolvConf() // reported as an event, as at the kubelet's start
	return c, nil
}

// EventLog is an event recorder that logs events, for agents that do not
// send them to an apiserver.
type EventLog struct{ Log logr.Logger }

// Eventf logs one event.
func (e EventLog) Eventf(obj runtime.Object, eventtype, reason, format string, args ...interface{}) {
	name := ""
	if ref, ok := obj.(*v1.ObjectReference); ok {
		name = ref.Kind + " " + ref.Name
	} else if m, err := meta.Accessor(obj); err == nil {
		name = m.GetNamespace() + "/" + m.GetName()
	}
	e.Log.Info(fmt.Sprintf(format, args...), "type", eventtype, "reason", reason, "object", name)
}
