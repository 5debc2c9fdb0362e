package podutil

import "strings"

// SysctlWithDots is a sysctl name in the dotted form the kernel's
// /proc/sys paths and the runtime take, as the kubelet's
// ConvertSysctlVariableToDotsSeparator: a name whose first separator is '/'
// has '/' and '.' swapped, so "net/ipv4/conf/eno2.100/rp_filter" (an
// interface named eno2.100) is "net.ipv4.conf.eno2/100.rp_filter"; a
// dotted name is kept.
func SysctlWithDots(name string) string {
	i := strings.IndexAny(name, "./")
	if i < 0 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
}
