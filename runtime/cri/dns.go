package cri

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DNSConfigurer gives a pod's sandbox its resolver configuration, the
// kubelet's dns configurer; *dns.Configurer (package
// github.com/nodekit/nodekit/dns) fits.
type DNSConfigurer interface {
	PodDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error)
}

// podDNS is the sandbox's DNS configuration: Config.DNS's, or without one
// the pod's spec.dnsConfig as it stands (and the runtime's default, the
// host's resolv.conf, without that).
func (m *Manager) podDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	if m.cfg.DNS != nil {
		return m.cfg.DNS.PodDNS(pod)
	}
	d := pod.Spec.DNSConfig
	if d == nil {
		return nil, nil
	}
	dns := &runtimeapi.DNSConfig{Servers: d.Nameservers, Searches: d.Searches}
	for _, o := range d.Options {
		opt := o.Name
		if o.Value != nil {
			opt += ":" + *o.Value
		}
		dns.Options = append(dns.Options, opt)
	}
	return dns, nil
}
