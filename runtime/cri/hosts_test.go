package cri_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/dns"
	"github.com/nodekit/nodekit/runtime/cri"
)

// The fake runtime gives every sandbox this IP.
const fakeSandboxIP = "192.168.192.168"

func TestContainersGetThePodsHostsFile(t *testing.T) {
	d, err := dns.New(dns.Config{ClusterDomain: "cluster.local"})
	require.NoError(t, err)
	e := newFakeEnv(t, func(c *cri.Config) { c.DNS = d })
	pod := newPod("hosts", "busybox:1", func(p *v1.Pod) {
		p.Spec.Hostname, p.Spec.Subdomain = "web", "sub"
		p.Spec.HostAliases = []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo.remote", "bar.remote"}}}
		p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox:1", Command: []string{"true"}}}
	})
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())

	hostsMount := func(name string) *runtimeapi.Mount {
		ids := e.srv.ContainerIDs(name)
		require.Len(t, ids, 1)
		e.srv.Runtime.Lock()
		defer e.srv.Runtime.Unlock()
		for _, m := range e.srv.Runtime.Containers[ids[0]].Mounts {
			if m.ContainerPath == "/etc/hosts" {
				return m
			}
		}
		return nil
	}
	m := hostsMount("init")
	require.NotNil(t, m, "the init container has the pod's hosts file at /etc/hosts")
	b, err := os.ReadFile(m.HostPath)
	require.NoError(t, err)
	require.Contains(t, string(b), "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n")
	require.Contains(t, string(b), fakeSandboxIP+"\tweb.sub.test.svc.cluster.local\tweb\n")
	require.Contains(t, string(b), "\n# Entries added by HostAliases.\n123.45.67.89\tfoo.remote\tbar.remote\n")

	require.Equal(t, "web", sandboxOf(t, e, "init").Hostname)

	t.Run("a container mounting /etc/hosts keeps its own", func(t *testing.T) {
		pod := newPod("ownhosts", "busybox:1", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].Name = "own"
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "h", MountPath: "/etc/hosts", SubPath: "hosts"}}
		})
		require.NoError(t, e.sync(t, pod, nil).Error())
		m := hostsMount("own")
		require.NotNil(t, m)
		require.Contains(t, m.HostPath, "kubernetes.io~empty-dir")
	})
	t.Run("setHostnameAsFQDN names the sandbox with the FQDN", func(t *testing.T) {
		pod := newPod("fqdn", "busybox:1", func(p *v1.Pod) {
			p.Spec.Containers[0].Name = "fqdn"
			p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "sub", ptr.To(true)
		})
		require.NoError(t, e.sync(t, pod, nil).Error())
		require.Equal(t, "fqdn.sub.test.svc.cluster.local", sandboxOf(t, e, "fqdn").Hostname)
	})
}

// sandboxOf is the config of the sandbox of the only container named name.
func sandboxOf(t *testing.T, e *fakeEnv, name string) *runtimeapi.PodSandboxConfig {
	t.Helper()
	ids := e.srv.ContainerIDs(name)
	require.Len(t, ids, 1)
	e.srv.Runtime.Lock()
	sb := e.srv.Runtime.Containers[ids[0]].SandboxID
	e.srv.Runtime.Unlock()
	cfg := e.srv.SandboxConfig(sb)
	require.NotNil(t, cfg)
	return cfg
}
