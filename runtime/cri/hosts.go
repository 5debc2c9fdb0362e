package cri

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// etcHostsPath is where containers see the pod's hosts file, and where the
// node's own is unless Config.HostsFile says otherwise.
const etcHostsPath = "/etc/hosts"

// The kubelet's headers of the hosts files it writes.
const (
	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// hostnameMaxLen is the kernel's limit on a hostname (64 bytes with the NUL).
const hostnameMaxLen = 63

// clusterDomainer is a DNSConfigurer that knows the cluster's DNS domain,
// which a pod with a subdomain gets in its hosts file and, with
// setHostnameAsFQDN, its hostname; *dns.Configurer is one.
type clusterDomainer interface {
	ClusterDomain() string
}

// clusterDomain is Config.DNS's cluster domain, "" without one.
func (m *Manager) clusterDomain() string {
	if d, ok := m.cfg.DNS.(clusterDomainer); ok {
		return d.ClusterDomain()
	}
	return ""
}

// podHostnameAndDomain is the pod's hostname and domain, as the kubelet's
// GeneratePodHostNameAndDomain: spec.hostnameOverride if set (a DNS
// subdomain, no domain), else spec.hostname or the pod's name, cut to 63
// characters; the domain is <subdomain>.<namespace>.svc.<cluster domain>
// with a spec.subdomain. An invalid name is an error.
func podHostnameAndDomain(pod *v1.Pod, clusterDomain string) (hostname, domain string, err error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) > 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(msgs, ";"))
		}
		h, err := truncateHostname(pod.Name, *o)
		return h, "", err
	}
	hostname = pod.Name
	if h := pod.Spec.Hostname; h != "" {
		if msgs := validation.IsDNS1123Label(h); len(msgs) > 0 {
			return "", "", fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", h, strings.Join(msgs, ";"))
		}
		hostname = h
	}
	if hostname, err = truncateHostname(pod.Name, hostname); err != nil {
		return "", "", err
	}
	if s := pod.Spec.Subdomain; s != "" {
		if msgs := validation.IsDNS1123Label(s); len(msgs) > 0 {
			return "", "", fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", s, strings.Join(msgs, ";"))
		}
		domain = s + "." + pod.Namespace + ".svc"
		if clusterDomain != "" {
			domain += "." + clusterDomain
		}
	}
	return hostname, domain, nil
}

// truncateHostname cuts a hostname longer than the kernel takes to 63
// characters, without a trailing '-' or '.'.
func truncateHostname(podName, hostname string) (string, error) {
	if len(hostname) <= hostnameMaxLen {
		return hostname, nil
	}
	h := strings.TrimRight(hostname[:hostnameMaxLen], "-.")
	if h == "" {
		return "", fmt.Errorf("hostname for pod %q was invalid: %q", podName, hostname)
	}
	return h, nil
}

// kernelHostname is the sandbox's hostname, as the kubelet's
// GetNodenameForKernel: the FQDN with setHostnameAsFQDN and a domain (at
// most 64 characters), else the short name.
func kernelHostname(hostname, domain string, asFQDN *bool) (string, error) {
	if asFQDN == nil || !*asFQDN || domain == "" {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > hostnameMaxLen+1 {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (64 characters is the max, %d characters requested)", fqdn, len(fqdn))
	}
	return fqdn, nil
}

// sandboxHostname is the hostname the runtime gives the pod's sandbox:
// none on the host's network (the node's stays).
func (m *Manager) sandboxHostname(pod *v1.Pod) (string, error) {
	if pod.Spec.HostNetwork {
		return "", nil
	}
	h, d, err := podHostnameAndDomain(pod, m.clusterDomain())
	if err != nil {
		return "", err
	}
	return kernelHostname(h, d, pod.Spec.SetHostnameAsFQDN)
}

// hostsFile is the pod's hosts file, <PodsRoot>/<uid>/etc-hosts, and what
// it is to hold.
type hostsFile struct {
	path    string
	content []byte
}

// needsHostsFile reports whether the pod's containers get a managed hosts
// file, as the kubelet's shouldMountHostsFile: a pod on the host's network
// always, one on the pod network once its sandbox has an IP. Windows, where
// the kubelet leaves hostProcess pods alone, is not one of nodekit's OSes.
func needsHostsFile(pod *v1.Pod, podIPs []string) bool {
	return goruntime.GOOS != "windows" && (pod.Spec.HostNetwork || len(podIPs) > 0)
}

// hostsFileFor builds the pod's hosts file as the kubelet's ensureHostsFile:
// on the host's network the node's hosts file with the pod's hostAliases,
// else localhost, the pod's IPs with its hostname (and FQDN), and the
// hostAliases.
func (m *Manager) hostsFileFor(pod *v1.Pod, podIPs []string) (hostsFile, error) {
	f := hostsFile{path: filepath.Join(m.cfg.PodsRoot, string(pod.UID), "etc-hosts")}
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(cmp.Or(m.cfg.HostsFile, etcHostsPath))
		if err != nil {
			return f, fmt.Errorf("reading the node's hosts file: %w", err)
		}
		var b bytes.Buffer
		b.WriteString(managedHostsHeaderHostNetwork)
		b.Write(node)
		b.Write(hostAliasesEntries(pod.Spec.HostAliases))
		f.content = b.Bytes()
		return f, nil
	}
	h, d, err := podHostnameAndDomain(pod, m.clusterDomain())
	if err != nil {
		return f, err
	}
	f.content = managedHostsContent(podIPs, h, d, pod.Spec.HostAliases)
	return f, nil
}

// managedHostsContent is the hosts file of a pod on the pod network.
func managedHostsContent(podIPs []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasesEntries(aliases))
	return b.Bytes()
}

// hostAliasesEntries is the hostAliases block: one line per entry, its
// hostnames tab-separated.
func hostAliasesEntries(aliases []v1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// write writes the file in place, so that running containers, which have it
// bind-mounted, see the new contents.
func (f hostsFile) write() error {
	if err := os.MkdirAll(filepath.Dir(f.path), 0o750); err != nil {
		return err
	}
	if err := os.WriteFile(f.path, f.content, 0o644); err != nil {
		return err
	}
	return os.Chmod(f.path, 0o644)
}
