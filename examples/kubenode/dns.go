package main

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

// dnsOptions are the kubelet's cluster DNS flags.
type dnsOptions struct {
	clusterDNS    string
	clusterDomain string
	resolvConf    string
}

func (d *dnsOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&d.clusterDNS, "cluster-dns", "", "with -cri: comma-separated cluster DNS server IPs for pods with dnsPolicy ClusterFirst (without, they get the host's resolver)")
	fs.StringVar(&d.clusterDomain, "cluster-domain", "", "with -cri: the cluster's DNS domain, e.g. cluster.local; ClusterFirst pods search <ns>.svc.<domain> svc.<domain> <domain>")
	fs.StringVar(&d.resolvConf, "resolv-conf", "/etc/resolv.conf", "with -cri: the host resolver file pods with dnsPolicy Default copy; empty for the local resolver")
}

// configurer builds the DNS configurer; its events go to the log.
func (d *dnsOptions) configurer(node string, log logr.Logger) (*dns.Configurer, error) {
	var servers []string
	for _, s := range strings.Split(d.clusterDNS, ",") {
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	c, err := dns.New(dns.Config{ClusterDNS: servers, ClusterDomain: d.clusterDomain, ResolvConf: d.resolvConf,
		NodeName: node, Recorder: eventLog{log.WithName("events")}, Log: log.WithName("dns")})
	if err != nil {
		return nil, fmt.Errorf("%w: -cluster-dns, -cluster-domain: %w", errUsage, err)
	}
	_ = c.CheckLimitsForResolvConf() // reported as an event, as at the kubelet's start
	return c, nil
}

// eventLog logs events (this agent does not send events to the apiserver).
type eventLog struct{ log logr.Logger }

func (e eventLog) Eventf(obj runtime.Object, eventtype, reason, format string, args ...interface{}) {
	name := ""
	if ref, ok := obj.(*v1.ObjectReference); ok {
		name = ref.Kind + " " + ref.Name
	} else if m, err := meta.Accessor(obj); err == nil {
		name = m.GetNamespace() + "/" + m.GetName()
	}
	e.log.Info(fmt.Sprintf(format, args...), "type", eventtype, "reason", reason, "object", name)
}
