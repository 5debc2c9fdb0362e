package staticpod

import (
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podutil"
)

// Origin says where a static pod comes from.
type Origin struct {
	// Source is podutil.FileSource or podutil.HTTPSource.
	Source string
	// Location is the manifest's file path or URL; it enters the UID.
	Location string
	// NodeName is the node the pod runs on.
	NodeName string
}

// Prepare applies the API and static-pod defaults to a decoded pod and
// validates it; on error (wrapping ErrInvalid) the pod must not be used.
func Prepare(pod *v1.Pod, o Origin) error {
	if pod.Name == "" {
		return fmt.Errorf("%w: name is needed for the pod", ErrInvalid)
	}
	SetAPIDefaults(pod)
	if err := ApplyStaticDefaults(pod, o); err != nil {
		return err
	}
	return Validate(pod)
}

// GeneratePodName is the static pod's name on the node: the manifest's name
// suffixed with the lowercased node name, unique among nodes.
func GeneratePodName(name, nodeName string) string {
	return name + "-" + strings.ToLower(nodeName)
}

// ApplyStaticDefaults applies what the kubelet applies to file and URL pods:
// a UID hashed from the pod's content, node and location when it has none,
// the node-suffixed name, namespace "default" when unset, spec.nodeName, the
// config.hash annotation (the UID) and config.source, a NoExecute toleration
// for file pods so node problems do not evict them, and phase Pending.
func ApplyStaticDefaults(pod *v1.Pod, o Origin) error {
	if pod.UID == "" {
		h := fnv.New128a()
		b, err := pod.Marshal()
		if err != nil {
			return fmt.Errorf("%w: encoding for its UID: %v", ErrInvalid, err)
		}
		_, _ = h.Write(b)
		if o.Source == podutil.FileSource {
			fmt.Fprintf(h, "host:%s", o.NodeName)
			fmt.Fprintf(h, "file:%s", o.Location)
		} else {
			fmt.Fprintf(h, "url:%s", o.Location)
		}
		pod.UID = types.UID(hex.EncodeToString(h.Sum(nil)))
	}
	pod.Name = GeneratePodName(pod.Name, o.NodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = o.NodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[podutil.ConfigHashAnnotationKey] = string(pod.UID)
	pod.Annotations[podutil.ConfigSourceAnnotationKey] = o.Source
	if o.Source == podutil.FileSource {
		addOrUpdateToleration(pod, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	}
	pod.Status.Phase = v1.PodPending
	return nil
}

// addOrUpdateToleration replaces a toleration matching t (same key,
// operator, value and effect) or appends t.
func addOrUpdateToleration(pod *v1.Pod, t v1.Toleration) {
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].MatchToleration(&t) {
			pod.Spec.Tolerations[i] = t
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
}

// SetAPIDefaults applies the v1 API defaults that the apiserver (and the
// kubelet's decoder) would apply and that a node acts on: restart, DNS and
// pull policies, grace period, scheduler name, security context, service
// links, termination message path and policy, port protocols (and host ports
// on the host network), probe and handler defaults, requests defaulting to
// limits, an emptyDir for a volume without a source, and volume file modes.
func SetAPIDefaults(pod *v1.Pod) {
	s := &pod.Spec
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To[int64](v1.DefaultTerminationGracePeriodSeconds)
	}
	if s.SchedulerName == "" {
		s.SchedulerName = v1.DefaultSchedulerName
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	if s.EnableServiceLinks == nil {
		s.EnableServiceLinks = ptr.To(v1.DefaultEnableServiceLinks)
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i], s.HostNetwork)
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i], s.HostNetwork)
	}
	for i := range s.EphemeralContainers {
		c := (*v1.Container)(&s.EphemeralContainers[i].EphemeralContainerCommon)
		defaultContainer(c, s.HostNetwork)
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i])
	}
}

func defaultContainer(c *v1.Container, hostNetwork bool) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	c.ImagePullPolicy = podutil.PullPolicy(c)
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for i := range c.Env {
		if r := c.Env[i].ValueFrom; r != nil && r.FieldRef != nil && r.FieldRef.APIVersion == "" {
			r.FieldRef.APIVersion = "v1"
		}
	}
	// Requests default to limits where unset.
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = v1.ResourceList{}
			}
			c.Resources.Requests[name] = q.DeepCopy()
		}
	}
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if c.Lifecycle != nil {
		defaultHandler(c.Lifecycle.PostStart)
		defaultHandler(c.Lifecycle.PreStop)
	}
}

func defaultProbe(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr.To("")
	}
}

func defaultHandler(h *v1.LifecycleHandler) {
	if h != nil {
		defaultHTTPGet(h.HTTPGet)
	}
}

func defaultHTTPGet(g *v1.HTTPGetAction) {
	if g == nil {
		return
	}
	if g.Path == "" {
		g.Path = "/"
	}
	if g.Scheme == "" {
		g.Scheme = v1.URISchemeHTTP
	}
	if g.Port == (intstr.IntOrString{}) {
		return // left for validation to reject
	}
}

func defaultVolume(v *v1.Volume) {
	if countVolumeSources(&v.VolumeSource) == 0 {
		v.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	if v.HostPath != nil && v.HostPath.Type == nil {
		v.HostPath.Type = ptr.To(v1.HostPathUnset)
	}
	if v.DownwardAPI != nil && v.DownwardAPI.DefaultMode == nil {
		v.DownwardAPI.DefaultMode = ptr.To(v1.DownwardAPIVolumeSourceDefaultMode)
	}
	if v.Projected != nil && v.Projected.DefaultMode == nil {
		v.Projected.DefaultMode = ptr.To(v1.ProjectedVolumeSourceDefaultMode)
	}
}
