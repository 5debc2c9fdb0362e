// Package dns is the kubelet's DNS configurer: it computes the resolver
// configuration (nameservers, search path, options) of a pod's sandbox from
// the pod's dnsPolicy and dnsConfig, the cluster DNS servers, the cluster
// domain and the host's resolv.conf, as the kubelet's
// pkg/kubelet/network/dns does.
//
// Where it sits: runtime/cri asks it for the DNSConfig of every sandbox it
// creates (cri.Config.DNS); a runtime that is not CRI can call PodDNS too and
// write the result as a file with ResolvConf.
//
// What it owns:
//   - the four dnsPolicy values: ClusterFirst (the cluster DNS servers, the
//     search path <ns>.svc.<domain> svc.<domain> <domain> plus the host's,
//     ndots:5), ClusterFirstWithHostNet (the same for host-network pods),
//     Default (the host's resolv.conf; also ClusterFirst with host network,
//     and ClusterFirst when no cluster DNS is configured, with a
//     MissingClusterDNS event) and None (only spec.dnsConfig);
//   - spec.dnsConfig merged on top: nameservers and searches appended
//     without duplicates, options overriding by name;
//   - the kubelet's limits: at most 3 nameservers, 32 search domains, 2048
//     characters of search line and 253 per domain; what is cut is reported
//     as a DNSConfigForming warning event on the pod;
//   - CheckLimitsForResolvConf, the kubelet's start-up check of the host's
//     resolv.conf (CheckLimitsForResolvConf warning events on the node).
//
// A resolv.conf that cannot be read or parsed fails PodDNS, and so the
// sandbox's creation, as it does in the kubelet.
//
// Usage:
//
//	c, err := dns.New(dns.Config{
//		ClusterDNS:    []string{"10.96.0.10"},
//		ClusterDomain: "cluster.local",
//		ResolvConf:    "/etc/resolv.conf",
//		Recorder:      recorder, // optional
//	})
//	cfg, err := c.PodDNS(pod) // *runtimeapi.DNSConfig for the sandbox
//	file := dns.ResolvConf(cfg) // or as a resolv.conf file
package dns
