package node

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// memTotal is MemTotal from /proc/meminfo in bytes, or 0.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// osImage is PRETTY_NAME from os-release, or "" (the kubelet says
// "Unknown" only when cadvisor cannot tell).
func osImage() string {
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				if u, err := strconv.Unquote(v); err == nil {
					return u
				}
				return strings.Trim(v, `"'`)
			}
		}
	}
	return ""
}

// nodeAddresses is the node's address list, as the kubelet's NodeAddress
// setter without a cloud provider: addresses as given; else the NodeIPs as
// InternalIPs, primary first; else the host's first global unicast
// address (see defaultAddresses); then Hostname.
func nodeAddresses(addresses []v1.NodeAddress, nodeIPs []string, hostname string) []v1.NodeAddress {
	if len(addresses) > 0 {
		return addresses
	}
	preferV6 := false
	if len(nodeIPs) == 1 {
		if ip := net.ParseIP(nodeIPs[0]); ip.IsUnspecified() {
			preferV6, nodeIPs = ip.To4() == nil, nil
		}
	}
	var out []v1.NodeAddress
	switch {
	case len(nodeIPs) > 0:
		for _, ip := range nodeIPs {
			out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: net.ParseIP(ip).String()})
		}
	case net.ParseIP(hostname) != nil:
		// The kubelet uses a host name that is an IP as the node's IP.
		out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: hostname})
	default:
		if ip := hostIP(preferV6); ip != "" {
			out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
		}
	}
	return append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: hostname})
}

// hostIP is the host's first global unicast address of the preferred
// family, else of the other, else "".
func hostIP(preferV6 bool) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	var other string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || !ipn.IP.IsGlobalUnicast() {
			continue
		}
		if (ipn.IP.To4() == nil) == preferV6 {
			return ipn.IP.String()
		}
		if other == "" {
			other = ipn.IP.String()
		}
	}
	return other
}
