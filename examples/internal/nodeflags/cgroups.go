package nodeflags

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/cm"
	"github.com/nodekit/nodekit/runtime/cri"
)

// Cgroups are the kubelet's QoS cgroup flags.
type Cgroups struct {
	perQOS         bool
	driver, root   string
	systemReserved resourceListFlag
	kubeReserved   resourceListFlag
	enforce        string
}

// AddFlags defines -cgroups-per-qos, -cgroup-driver, -cgroup-root,
// -system-reserved, -kube-reserved and -enforce-node-allocatable on fs.
func (c *Cgroups) AddFlags(fs *flag.FlagSet) {
	c.systemReserved, c.kubeReserved = resourceListFlag{}, resourceListFlag{}
	fs.BoolVar(&c.perQOS, "cgroups-per-qos", false, "with -cri: put pods in the kubelet's QoS cgroups (kubepods, burstable, besteffort) with pod-level limits; needs root. The kubelet's default is true, here it is opt-in as it writes the host's cgroups")
	fs.StringVar(&c.driver, "cgroup-driver", "", "with -cgroups-per-qos: cgroupfs or systemd; default the runtime's when it tells (containerd 2.x), else cgroupfs")
	fs.StringVar(&c.root, "cgroup-root", "/", "with -cgroups-per-qos: the cgroup kubepods is made under")
	fs.Var(c.systemReserved, "system-reserved", "`cpu=500m,memory=1Gi` kept from pods for the system: off the Node's allocatable (kubenode) and, with -enforce-node-allocatable pods, off the kubepods cgroup")
	fs.Var(c.kubeReserved, "kube-reserved", "`cpu=500m,memory=1Gi` kept from pods for the agent and runtime: off the Node's allocatable (kubenode) and, with -enforce-node-allocatable pods, off the kubepods cgroup")
	fs.StringVar(&c.enforce, "enforce-node-allocatable", "", `with -cgroups-per-qos: "pods" limits the kubepods cgroup to capacity minus the reservations`)
}

// Validate checks the flags; criEndpoint is the -cri flag's value.
func (c *Cgroups) Validate(criEndpoint string) error {
	if c.perQOS && criEndpoint == "" {
		return fmt.Errorf("%w: -cgroups-per-qos needs -cri", ErrUsage)
	}
	if c.enforce != "" && c.enforce != "pods" {
		return fmt.Errorf("%w: -enforce-node-allocatable: only \"pods\" is supported, got %q", ErrUsage, c.enforce)
	}
	return nil
}

// Reserved returns -system-reserved and -kube-reserved, for
// node.Config's SystemReserved and KubeReserved (the Node's allocatable).
func (c *Cgroups) Reserved() (system, kube v1.ResourceList) {
	return v1.ResourceList(c.systemReserved).DeepCopy(), v1.ResourceList(c.kubeReserved).DeepCopy()
}

// Setup gives m the QoS cgroup manager when asked for.
func (c *Cgroups) Setup(ctx context.Context, m *cri.Manager, node string, rec EventRecorder, log logr.Logger) error {
	if !c.perQOS {
		return nil
	}
	cgm, err := cm.New(ctx, cm.Config{
		Driver: cm.Driver(c.driver), DriverSource: m, CgroupRoot: c.root,
		SystemReserved: v1.ResourceList(c.systemReserved), KubeReserved: v1.ResourceList(c.kubeReserved),
		EnforceNodeAllocatable: c.enforce == "pods",
		NodeName:               node, Recorder: rec, Log: log.WithName("cm"),
	})
	if err != nil {
		return fmt.Errorf("-cgroups-per-qos: %w", err)
	}
	m.SetPodCgroups(cgm)
	log.Info("Pods run in QoS cgroups", "driver", cgm.Driver(), "allocatable", cgm.Allocatable())
	return nil
}

// resourceListFlag parses name=quantity pairs, as the kubelet's reserved
// flags.
type resourceListFlag v1.ResourceList

func (r resourceListFlag) String() string {
	var parts []string
	for k, v := range r {
		parts = append(parts, string(k)+"="+v.String())
	}
	return strings.Join(parts, ",")
}

func (r resourceListFlag) Set(s string) error {
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q: want name=quantity", kv)
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q: %w", kv, err)
		}
		r[v1.ResourceName(strings.TrimSpace(k))] = q
	}
	return nil
}
