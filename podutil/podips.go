package podutil

import "net/netip"

// SortPodIPs picks a pod's IPs as the kubelet's sortPodIPs does for its
// status and the downward API: a runtime may list any number in any order,
// the apiserver accepts at most one per family. The first IP of the node's
// primary family (the family of nodeIPs[0]; IPv4 without node IPs) comes
// first, then the first of the other family; anything else, unparsable IPs
// included, is dropped. It returns ips itself when they are already so.
func SortPodIPs(ips, nodeIPs []string) []string {
	primary, secondary := isIPv4, isIPv6
	if len(nodeIPs) > 0 && isIPv6(nodeIPs[0]) {
		primary, secondary = secondary, primary
	}
	switch {
	case len(ips) == 0:
		return nil
	case len(ips) == 1 && (primary(ips[0]) || secondary(ips[0])):
		return ips
	case len(ips) == 2 && primary(ips[0]) && secondary(ips[1]):
		return ips
	}
	out := make([]string, 0, 2)
	for _, valid := range [...]func(string) bool{primary, secondary} {
		for _, ip := range ips {
			if valid(ip) {
				out = append(out, ip)
				break
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// family is 4 or 6 for an IP address as net.ParseIP reads it (IPv4-mapped
// IPv6 addresses count as IPv4, as in k8s.io/utils/net), 0 for anything else.
// netip parses without allocating: this runs on every status generation.
func family(s string) int {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil || a.Zone() != "":
		return 0
	case a.Unmap().Is4():
		return 4
	default:
		return 6
	}
}

func isIPv4(s string) bool { return family(s) == 4 }
func isIPv6(s string) bool { return family(s) == 6 }
