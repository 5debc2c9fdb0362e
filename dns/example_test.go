package dns_test

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/dns"
)

func ExampleConfigurer_PodDNS() {
	dir, _ := os.MkdirTemp("", "dns")
	defer os.RemoveAll(dir)
	host := filepath.Join(dir, "resolv.conf")
	_ = os.WriteFile(host, []byte("nameserver 192.168.1.1\nsearch corp.example\n"), 0o644)

	c, err := dns.New(dns.Config{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: host})
	if err != nil {
		panic(err)
	}
	pod := &v1.Pod{}
	pod.Namespace, pod.Spec.DNSPolicy = "shop", v1.DNSClusterFirst
	cfg, err := c.PodDNS(pod)
	if err != nil {
		panic(err)
	}
	fmt.Print(string(dns.ResolvConf(cfg)))
	// Output:
	// search shop.svc.cluster.local svc.cluster.local cluster.local corp.example
	// nameserver 10.96.0.10
	// options ndots:5
}
