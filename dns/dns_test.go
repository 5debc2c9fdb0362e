package dns_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/dns"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
)

const hostFile = `# generated
nameserver 192.168.1.1
nameserver 192.168.1.2
search corp.example. lab.example
options ndots:2 timeout:3
`

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func pod(policy v1.DNSPolicy, hostNet bool, mut ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID = "web", "shop", "uid-1"
	p.Spec.DNSPolicy, p.Spec.HostNetwork = policy, hostNet
	for _, m := range mut {
		m(p)
	}
	return p
}

func withDNSConfig(d v1.PodDNSConfig) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.DNSConfig = &d }
}

func TestPodDNSPerPolicy(t *testing.T) {
	host := writeFile(t, hostFile)
	cluster := dns.Config{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: host}
	clusterSearch := []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "lab.example"}
	hostCfg := &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1", "192.168.1.2"}, Searches: []string{"corp.example", "lab.example"},
		Options: []string{"ndots:2", "timeout:3"}}
	tests := []struct {
		name   string
		cfg    dns.Config
		pod    *v1.Pod
		want   *runtimeapi.DNSConfig
		events []string // reasons
	}{
		{"ClusterFirst gets the cluster DNS, the cluster search path before the host's, ndots:5", cluster,
			pod(v1.DNSClusterFirst, false),
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}, nil},
		{"an empty dnsPolicy is ClusterFirst", cluster, pod("", false),
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}, nil},
		{"ClusterFirst with host network gets the host's resolv.conf", cluster, pod(v1.DNSClusterFirst, true), hostCfg, nil},
		{"ClusterFirstWithHostNet with host network gets the cluster DNS", cluster, pod(v1.DNSClusterFirstWithHostNet, true),
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}, nil},
		{"ClusterFirstWithHostNet without host network gets the cluster DNS", cluster, pod(v1.DNSClusterFirstWithHostNet, false),
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}, nil},
		{"Default gets the host's resolv.conf", cluster, pod(v1.DNSDefault, false), hostCfg, nil},
		{"None gets only its dnsConfig", cluster,
			pod(v1.DNSNone, false, withDNSConfig(v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"},
				Options: []v1.PodDNSConfigOption{{Name: "edns0"}}})),
			&runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []string{"edns0"}}, nil},
		{"None without dnsConfig gets nothing", cluster, pod(v1.DNSNone, false), &runtimeapi.DNSConfig{}, nil},
		{"dnsConfig is merged into ClusterFirst: duplicates dropped, options overridden by name", cluster,
			pod(v1.DNSClusterFirst, false, withDNSConfig(v1.PodDNSConfig{Nameservers: []string{"10.96.0.10", "8.8.8.8"},
				Searches: []string{"cluster.local", "extra.example"},
				Options:  []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}, {Name: "single-request"}}})),
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10", "8.8.8.8"}, Searches: append(append([]string(nil), clusterSearch...), "extra.example"),
				Options: []string{"ndots:1", "single-request"}}, nil},
		{"ClusterFirst without cluster DNS falls back to Default with events on node and pod",
			dns.Config{ClusterDomain: "cluster.local", ResolvConf: host}, pod(v1.DNSClusterFirst, false), hostCfg,
			[]string{dns.ReasonMissingClusterDNS, dns.ReasonMissingClusterDNS}},
		{"ClusterFirst without cluster domain keeps the host's search path",
			dns.Config{ClusterDNS: []string{"10.96.0.10"}, ResolvConf: host}, pod(v1.DNSClusterFirst, false),
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"corp.example", "lab.example"}, Options: []string{"ndots:5"}}, nil},
		{"Default without a host file gets the local resolver", dns.Config{ClusterDNS: []string{"10.96.0.10"}},
			pod(v1.DNSDefault, false), &runtimeapi.DNSConfig{Servers: []string{"127.0.0.1"}, Searches: []string{"."}}, nil},
		{"Default without a host file on an IPv6 node gets ::1", dns.Config{NodeIPs: []string{"fd00::1"}},
			pod(v1.DNSDefault, false), &runtimeapi.DNSConfig{Servers: []string{"::1"}, Searches: []string{"."}}, nil},
		{"more than three nameservers are cut with an event", cluster,
			pod(v1.DNSDefault, false, withDNSConfig(v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8"}})),
			&runtimeapi.DNSConfig{Servers: []string{"192.168.1.1", "192.168.1.2", "1.1.1.1"}, Searches: hostCfg.Searches, Options: hostCfg.Options},
			[]string{dns.ReasonDNSConfigForming}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &podconfigtest.Recorder{}
			tt.cfg.Recorder = rec
			c, err := dns.New(tt.cfg)
			require.NoError(t, err)
			got, err := c.PodDNS(tt.pod)
			require.NoError(t, err)
			require.Equal(t, tt.want.Servers, got.Servers, "servers")
			require.Equal(t, tt.want.Searches, got.Searches, "searches")
			require.Equal(t, tt.want.Options, got.Options, "options")
			var reasons []string
			for _, e := range rec.Events() {
				require.Equal(t, v1.EventTypeWarning, e.Type)
				reasons = append(reasons, e.Reason)
			}
			require.Equal(t, tt.events, reasons)
		})
	}
}

func TestSearchLimits(t *testing.T) {
	long := strings.Repeat("a", 254)
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("d%d.example", i))
	}
	var wide []string // 30 domains of 100 chars: 3029 chars in all
	for i := range 30 {
		wide = append(wide, fmt.Sprintf("%02d%s", i, strings.Repeat("x", 98)))
	}
	tests := []struct {
		name     string
		searches []string
		want     int // domains kept
		cut      bool
	}{
		{"32 domains fit", many[:32], 32, false},
		{"more than 32 domains are cut to 32", many, 32, true},
		{"a domain over 253 characters is dropped", []string{"a.example", long, "b.example"}, 2, true},
		{"a line over 2048 characters is cut from the end", wide, 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &podconfigtest.Recorder{}
			c, err := dns.New(dns.Config{Recorder: rec})
			require.NoError(t, err)
			got, err := c.PodDNS(pod(v1.DNSNone, false, withDNSConfig(v1.PodDNSConfig{Searches: tt.searches})))
			require.NoError(t, err)
			require.Len(t, got.Searches, tt.want)
			require.LessOrEqual(t, len(strings.Join(got.Searches, " ")), dns.MaxSearchListChars)
			require.NotContains(t, got.Searches, long)
			if tt.cut {
				require.Len(t, rec.Events(), 1)
				e := rec.Events()[0]
				require.Equal(t, dns.ReasonDNSConfigForming, e.Reason)
				require.Contains(t, e.Message, "the applied search line is: "+strings.Join(got.Searches, " "))
			} else {
				require.Empty(t, rec.Events())
			}
		})
	}
}

func TestBadHostResolvConfFailsWithTheReason(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"a nameserver line without an address", "nameserver 1.1.1.1\nnameserver\n", "line 2: nameserver without an address"},
		{"a missing file", "", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "missing")
			if tt.file != "" {
				path = writeFile(t, tt.file)
			}
			c, err := dns.New(dns.Config{ClusterDNS: []string{"10.96.0.10"}, ResolvConf: path})
			require.NoError(t, err)
			_, err = c.PodDNS(pod(v1.DNSClusterFirst, false))
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, "resolv.conf")
			require.Error(t, c.CheckLimitsForResolvConf())
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, c := range map[string]dns.Config{
		"cluster DNS not an IP":  {ClusterDNS: []string{"dns.example"}},
		"cluster domain not DNS": {ClusterDomain: "Cluster_Local"},
		"node IP not an IP":      {NodeIPs: []string{"node-1"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := dns.New(c)
			require.True(t, errors.Is(err, dns.ErrInvalidConfig), "err = %v", err)
		})
	}
}

func TestCheckLimitsForResolvConf(t *testing.T) {
	var thirty []string
	for i := range 30 {
		thirty = append(thirty, fmt.Sprintf("d%d.example", i))
	}
	tests := []struct {
		name, file, domain string
		want               string
	}{
		{"a host file within the limits passes", hostFile, "cluster.local", ""},
		{"30 host domains leave no room for the cluster's three", "search " + strings.Join(thirty, " ") + "\n", "cluster.local",
			"more than 29 domains"},
		{"30 host domains fit without a cluster domain", "search " + strings.Join(thirty, " ") + "\n", "", ""},
		{"an overlong host domain is reported", "search " + strings.Repeat("b", 260) + "\n", "", "more than allowed 253 chars"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &podconfigtest.Recorder{}
			c, err := dns.New(dns.Config{ClusterDomain: tt.domain, ResolvConf: writeFile(t, tt.file), NodeName: "n1", Recorder: rec})
			require.NoError(t, err)
			err = c.CheckLimitsForResolvConf()
			if tt.want == "" {
				require.NoError(t, err)
				require.Empty(t, rec.Events())
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.Len(t, rec.Events(), 1)
			e := rec.Events()[0]
			require.Equal(t, dns.ReasonCheckLimitsForResolvConf, e.Reason)
			require.Equal(t, "Node", e.Object.(*v1.ObjectReference).Kind)
		})
	}
}

func TestParseResolvConf(t *testing.T) {
	got, err := dns.ParseResolvConf([]byte("; comment\nsearch old.example\nnameserver 10.0.0.1\nsearch a.example. b.example\n" +
		"options rotate\ndomain ignored.example\nnameserver 10.0.0.2\noptions ndots:3 edns0\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.1", "10.0.0.2"}, got.Servers, "nameservers accumulate")
	require.Equal(t, []string{"a.example", "b.example"}, got.Searches, "the last search line wins, trailing dots go")
	require.Equal(t, []string{"rotate", "ndots:3", "edns0"}, got.Options, "options accumulate across lines")
	require.Equal(t, "search a.example b.example\nnameserver 10.0.0.1\nnameserver 10.0.0.2\noptions rotate ndots:3 edns0\n", string(dns.ResolvConf(got)))
}

func TestParseResolvConfAsTheKubelet(t *testing.T) {
	for _, tc := range []struct {
		name     string
		file     string
		searches []string
		options  []string
	}{
		{"systemd-resolved's stub search . is no domain", "nameserver 127.0.0.53\nsearch .\noptions edns0 trust-ad\n", nil, []string{"edns0", "trust-ad"}},
		{"a . among domains is dropped", "search a.example . b.example.\n", []string{"a.example", "b.example"}, nil},
		{"options of later lines add to earlier ones", "options edns0 trust-ad\noptions ndots:2\n", nil, []string{"edns0", "trust-ad", "ndots:2"}},
		{"a later option overrides one of the same name in place", "options ndots:1 rotate\noptions timeout:2 ndots:5\n", nil, []string{"ndots:5", "rotate", "timeout:2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dns.ParseResolvConf([]byte(tc.file))
			require.NoError(t, err)
			require.Equal(t, tc.searches, got.Searches)
			require.Equal(t, tc.options, got.Options)
		})
	}
}

func BenchmarkPodDNSClusterFirst(b *testing.B) {
	p := filepath.Join(b.TempDir(), "resolv.conf")
	require.NoError(b, os.WriteFile(p, []byte(hostFile), 0o644))
	c, err := dns.New(dns.Config{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: p})
	require.NoError(b, err)
	pd := pod(v1.DNSClusterFirst, false)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.PodDNS(pd); err != nil {
			b.Fatal(err)
		}
	}
}
