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

// defaultAddresses is InternalIP of the host's first global unicast
// address (IPv4 first), and Hostname.
func defaultAddresses(hostname string) []v1.NodeAddress {
	var out []v1.NodeAddress
	if addrs, err := net.InterfaceAddrs(); err == nil {
		var v6 string
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || !ipn.IP.IsGlobalUnicast() {
				continue
			}
			if ipn.IP.To4() != nil {
				out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ipn.IP.String()})
				break
			}
			if v6 == "" {
				v6 = ipn.IP.String()
			}
		}
		if len(out) == 0 && v6 != "" {
			out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: v6})
		}
	}
	return append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: hostname})
}
