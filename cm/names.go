package cm

import (
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Driver is how cgroups are named and managed: the runtime's and the
// agent's must agree.
type Driver string

// The cgroup drivers, as the kubelet's --cgroup-driver and the CRI's
// RuntimeConfig name them.
const (
	DriverCgroupfs Driver = "cgroupfs"
	DriverSystemd  Driver = "systemd"
)

// Name is a cgroup named by its components from the root, driver-neutral,
// as the kubelet's CgroupName: {"kubepods", "burstable", "pod<uid>"}.
type Name []string

// kubepods is the name of the pods' top cgroup under the root.
const kubepods = "kubepods"

// qosName is the QoS level's component under kubepods; Guaranteed pods sit
// in kubepods itself.
func qosName(c v1.PodQOSClass) string {
	switch c {
	case v1.PodQOSBurstable:
		return "burstable"
	case v1.PodQOSBestEffort:
		return "besteffort"
	}
	return ""
}

// podName is the pod's component, "pod<uid>".
func podName(uid types.UID) string { return "pod" + string(uid) }

// child returns n with more components.
func (n Name) child(parts ...string) Name {
	out := make(Name, 0, len(n)+len(parts))
	out = append(out, n...)
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Cgroupfs is n for the cgroupfs driver: "/kubepods/burstable/pod<uid>".
func (n Name) Cgroupfs() string { return "/" + path.Join(n...) }

// Systemd is n for the systemd driver as a path of nested slices:
// "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice",
// each slice named after all its ancestors, "-" in components escaped as
// "_" (systemd reads "-" as nesting).
func (n Name) Systemd() string {
	if len(n) == 0 {
		return "/"
	}
	var b strings.Builder
	prefix := ""
	for _, c := range n {
		c = strings.ReplaceAll(c, "-", "_")
		if prefix != "" {
			prefix += "-"
		}
		prefix += c
		b.WriteString("/" + prefix + ".slice")
	}
	return b.String()
}

// Path is n's directory under a hierarchy's mount point for driver d.
func (n Name) Path(d Driver) string {
	if d == DriverSystemd {
		return n.Systemd()
	}
	return n.Cgroupfs()
}

// Parent is n as the runtime takes it for a sandbox's cgroup parent: the
// cgroupfs path, or the systemd slice's name.
func (n Name) Parent(d Driver) string {
	if d == DriverSystemd {
		return path.Base(n.Systemd())
	}
	return n.Cgroupfs()
}

// parseRoot splits a cgroup root ("/", "/nodekit", or for systemd
// "/nodekit.slice") into components.
func parseRoot(root string, d Driver) Name {
	var n Name
	for _, c := range strings.Split(root, "/") {
		if c == "" {
			continue
		}
		if d == DriverSystemd {
			// "a.slice/a-b.slice" names a, b.
			c = strings.TrimSuffix(c, ".slice")
			if len(n) > 0 {
				c = strings.TrimPrefix(c, strings.Join(n, "-")+"-")
			}
		}
		n = append(n, c)
	}
	return n
}
