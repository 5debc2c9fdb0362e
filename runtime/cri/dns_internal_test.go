package cri

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

type staticDNS runtimeapi.DNSConfig

func (s *staticDNS) PodDNS(*v1.Pod) (*runtimeapi.DNSConfig, error) {
	return (*runtimeapi.DNSConfig)(s), nil
}

func TestSandboxDNS(t *testing.T) {
	pod := &v1.Pod{}
	pod.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"},
		Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}}}

	m := &Manager{}
	sb, err := m.sandboxConfig(pod, 0)
	require.NoError(t, err)
	require.Equal(t, &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []string{"ndots:2", "edns0"}},
		sb.DnsConfig, "without a configurer the pod's dnsConfig is passed on")

	want := &staticDNS{Servers: []string{"10.96.0.10"}, Searches: []string{"ns.svc.cluster.local"}, Options: []string{"ndots:5"}}
	m = &Manager{cfg: Config{DNS: want}}
	sb, err = m.sandboxConfig(pod, 0)
	require.NoError(t, err)
	require.Same(t, (*runtimeapi.DNSConfig)(want), sb.DnsConfig, "the configurer decides")
}
