package cri

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestPodHostnameAndDomain(t *testing.T) {
	pod := func(name string, f func(*v1.PodSpec)) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		if f != nil {
			f(&p.Spec)
		}
		return p
	}
	tests := []struct {
		name           string
		pod            *v1.Pod
		domain         string
		host, fqdnPart string
		err            string
	}{
		{name: "the pod's name by default", pod: pod("web", nil), domain: "cluster.local", host: "web"},
		{name: "spec.hostname wins over the name", pod: pod("web", func(s *v1.PodSpec) { s.Hostname = "h" }), host: "h"},
		{name: "a subdomain gives the service domain", pod: pod("web", func(s *v1.PodSpec) { s.Hostname, s.Subdomain = "h", "sub" }),
			domain: "cluster.local", host: "h", fqdnPart: "sub.ns.svc.cluster.local"},
		{name: "a subdomain without a cluster domain", pod: pod("web", func(s *v1.PodSpec) { s.Subdomain = "sub" }), host: "web", fqdnPart: "sub.ns.svc"},
		{name: "a long name is cut to 63 characters without a trailing dash", pod: pod(strings.Repeat("a", 62)+"-zzz", nil), host: strings.Repeat("a", 62)},
		{name: "hostnameOverride wins over hostname and subdomain", pod: pod("web", func(s *v1.PodSpec) {
			s.Hostname, s.Subdomain, s.HostnameOverride = "h", "sub", ptr.To("my.host.example")
		}), domain: "cluster.local", host: "my.host.example"},
		{name: "a long hostnameOverride is cut too", pod: pod("web", func(s *v1.PodSpec) { s.HostnameOverride = ptr.To(strings.Repeat("b", 62) + ".c.d") }),
			host: strings.Repeat("b", 62)},
		{name: "an invalid hostnameOverride fails", pod: pod("web", func(s *v1.PodSpec) { s.HostnameOverride = ptr.To("Not_Valid") }),
			err: `pod HostnameOverride "Not_Valid" is not a valid DNS subdomain`},
		{name: "an invalid hostname fails", pod: pod("web", func(s *v1.PodSpec) { s.Hostname = "a.b" }), err: `pod Hostname "a.b" is not a valid DNS label`},
		{name: "an invalid subdomain fails", pod: pod("web", func(s *v1.PodSpec) { s.Subdomain = "A" }), err: `pod Subdomain "A" is not a valid DNS label`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, d, err := podHostnameAndDomain(tt.pod, tt.domain)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.host, h)
			require.Equal(t, tt.fqdnPart, d)
		})
	}
}

func TestSandboxHostname(t *testing.T) {
	tests := []struct {
		name string
		spec v1.PodSpec
		want string
		err  string
	}{
		{name: "short name without setHostnameAsFQDN", spec: v1.PodSpec{Subdomain: "sub"}, want: "web"},
		{name: "the FQDN with setHostnameAsFQDN", spec: v1.PodSpec{Subdomain: "sub", SetHostnameAsFQDN: ptr.To(true)}, want: "web.sub.ns.svc.cluster.local"},
		{name: "setHostnameAsFQDN without a subdomain is the short name", spec: v1.PodSpec{SetHostnameAsFQDN: ptr.To(true)}, want: "web"},
		{name: "an FQDN over 64 characters fails", spec: v1.PodSpec{Hostname: strings.Repeat("h", 40), Subdomain: "sub", SetHostnameAsFQDN: ptr.To(true)},
			err: "is too long (64 characters is the max, 65 characters requested)"},
		{name: "hostnameOverride", spec: v1.PodSpec{Subdomain: "sub", HostnameOverride: ptr.To("over.example")}, want: "over.example"},
		{name: "none on the host's network", spec: v1.PodSpec{HostNetwork: true, Hostname: "h"}, want: ""},
	}
	m := &Manager{cfg: Config{DNS: fixedDomain("cluster.local")}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.sandboxHostname(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: tt.spec})
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// fixedDomain is a DNSConfigurer with a cluster domain.
type fixedDomain string

func (d fixedDomain) PodDNS(*v1.Pod) (*runtimeapi.DNSConfig, error) { return nil, nil }
func (d fixedDomain) ClusterDomain() string                         { return string(d) }

func TestHostsFileContent(t *testing.T) {
	aliases := []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}, {IP: "1.2.3.4", Hostnames: []string{"baz"}}}
	const localhost = "# Kubernetes-managed hosts file.\n" +
		"127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\n" +
		"fe00::0\tip6-mcastprefix\n" +
		"fe00::1\tip6-allnodes\n" +
		"fe00::2\tip6-allrouters\n"
	const aliasBlock = "\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n1.2.3.4\tbaz\n"
	node := filepath.Join(t.TempDir(), "hosts")
	require.NoError(t, os.WriteFile(node, []byte("127.0.0.1 localhost\n10.0.0.1 node1\n"), 0o644))
	m := &Manager{cfg: Config{PodsRoot: "/pods", HostsFile: node, DNS: fixedDomain("cluster.local")}}
	tests := []struct {
		name string
		spec v1.PodSpec
		ips  []string
		want string
	}{
		{name: "the pod's IP and name", ips: []string{"10.244.0.5"}, want: localhost + "10.244.0.5\tweb\n"},
		{name: "every pod IP, with the FQDN of a subdomain", spec: v1.PodSpec{Hostname: "h", Subdomain: "sub"}, ips: []string{"10.244.0.5", "fd00::5"},
			want: localhost + "10.244.0.5\th.sub.ns.svc.cluster.local\th\nfd00::5\th.sub.ns.svc.cluster.local\th\n"},
		{name: "hostAliases after the pod's entries", spec: v1.PodSpec{HostAliases: aliases}, ips: []string{"10.244.0.5"},
			want: localhost + "10.244.0.5\tweb\n" + aliasBlock},
		{name: "hostnameOverride names the pod's IP", spec: v1.PodSpec{Subdomain: "sub", HostnameOverride: ptr.To("over.example")}, ips: []string{"10.244.0.5"},
			want: localhost + "10.244.0.5\tover.example\n"},
		{name: "the node's file with hostAliases on the host's network", spec: v1.PodSpec{HostNetwork: true, HostAliases: aliases},
			want: "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n10.0.0.1 node1\n" + aliasBlock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u"}, Spec: tt.spec}
			f, err := m.hostsFileFor(pod, tt.ips)
			require.NoError(t, err)
			require.Equal(t, "/pods/u/etc-hosts", f.path)
			require.Equal(t, tt.want, string(f.content))
		})
	}
}

func TestHostsMount(t *testing.T) {
	m := &Manager{cfg: Config{PodsRoot: "/pods"}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "own", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv/hosts"}}}}}}
	hostsMounts := func(ms []*runtimeapi.Mount) []string {
		var out []string
		for _, mt := range ms {
			if mt.ContainerPath == "/etc/hosts" {
				out = append(out, mt.HostPath)
			}
		}
		return out
	}
	tests := []struct {
		name string
		c    v1.Container
		ips  []string
		want []string
	}{
		{name: "a container of a pod with an IP gets the pod's file", c: v1.Container{Name: "c"}, ips: []string{"10.0.0.1"}, want: []string{"/pods/u/etc-hosts"}},
		{name: "none before the sandbox has an IP", c: v1.Container{Name: "c"}},
		{name: "a container mounting /etc/hosts itself keeps its own", c: v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "own", MountPath: "/etc/hosts"}}},
			ips: []string{"10.0.0.1"}, want: []string{"/srv/hosts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, prep, err := m.mounts(pod, &tt.c, tt.ips)
			require.NoError(t, err)
			require.Equal(t, tt.want, hostsMounts(got))
			require.Equal(t, tt.want != nil && tt.want[0] == "/pods/u/etc-hosts", prep.hosts != nil)
		})
	}
}
