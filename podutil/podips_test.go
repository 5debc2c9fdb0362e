package podutil

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSortPodIPsAsTheKubelet(t *testing.T) {
	for _, tc := range []struct {
		name         string
		ips, nodeIPs []string
		want         []string
	}{
		{"none", nil, []string{"10.0.0.1"}, nil},
		{"IPv6 first on an IPv4 node", []string{"fd00::5", "10.0.0.5"}, []string{"10.0.0.1"}, []string{"10.0.0.5", "fd00::5"}},
		{"IPv4 first on an IPv6 node", []string{"10.0.0.5", "fd00::5"}, []string{"fd00::1"}, []string{"fd00::5", "10.0.0.5"}},
		{"one per family", []string{"10.0.0.5", "10.0.0.6", "fd00::5", "fd00::6"}, nil, []string{"10.0.0.5", "fd00::5"}},
		{"no node IPs: IPv4 first", []string{"fd00::5", "10.0.0.5"}, nil, []string{"10.0.0.5", "fd00::5"}},
		{"unparsable dropped", []string{"bogus"}, nil, nil},
		{"already sorted is kept", []string{"10.0.0.5", "fd00::5"}, nil, []string{"10.0.0.5", "fd00::5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, SortPodIPs(tc.ips, tc.nodeIPs))
		})
	}
}

func BenchmarkSortPodIPs(b *testing.B) {
	ips, nodeIPs := []string{"10.0.0.5", "fd00::5"}, []string{"10.0.0.1"}
	b.ReportAllocs()
	for b.Loop() {
		_ = SortPodIPs(ips, nodeIPs)
	}
}

func TestIPFamilyAsK8sUtilsNet(t *testing.T) {
	for ip, want := range map[string]int{"10.0.0.1": 4, "::ffff:10.0.0.1": 4, "fd00::1": 6, "::1": 6, "fe80::1%eth0": 0, "bogus": 0, "": 0} {
		assert.Equal(t, want, family(ip), ip)
	}
}
