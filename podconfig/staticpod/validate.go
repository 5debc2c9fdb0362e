package staticpod

import (
	"fmt"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a defaulted static pod: object metadata (DNS-1123 name and
// namespace, labels, annotations), at least one container, DNS-1123 container
// names unique across init, regular and ephemeral containers, images present,
// ports, environment variable names, volumes (DNS-1123 names, unique, one
// source each) and mounts that name a volume, restart and DNS policies, a
// non-negative grace period, and that the pod references no API object. The
// error wraps ErrInvalid and lists every problem found.
func Validate(pod *v1.Pod) error {
	errs := apivalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, validateSpec(&pod.Spec, field.NewPath("spec"))...)
	if len(errs) > 0 {
		return fmt.Errorf("%w: %v", ErrInvalid, errs.ToAggregate())
	}
	if resource := apiObjectReference(pod); resource != "" {
		return fmt.Errorf("%w: static pods may not reference %s", ErrInvalid, resource)
	}
	return nil
}

func validateSpec(s *v1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := sets.New[string]()
	for i, v := range s.Volumes {
		vp := p.Child("volumes").Index(i)
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, msg))
		}
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		volumes.Insert(v.Name)
		if n := countVolumeSources(&v.VolumeSource); n != 1 {
			errs = append(errs, field.Invalid(vp, v.Name, fmt.Sprintf("must specify exactly one volume type, not %d", n)))
		}
		if v.HostPath != nil && v.HostPath.Path == "" {
			errs = append(errs, field.Required(vp.Child("hostPath", "path"), ""))
		}
	}

	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), "at least one container"))
	}
	names := sets.New[string]()
	check := func(c *v1.Container, cp *field.Path) {
		if c.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
		} else {
			for _, msg := range validation.IsDNS1123Label(c.Name) {
				errs = append(errs, field.Invalid(cp.Child("name"), c.Name, msg))
			}
			if names.Has(c.Name) {
				errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
			}
			names.Insert(c.Name)
		}
		if c.Image == "" {
			errs = append(errs, field.Required(cp.Child("image"), ""))
		} else if strings.TrimSpace(c.Image) != c.Image {
			errs = append(errs, field.Invalid(cp.Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
		for j, port := range c.Ports {
			pp := cp.Child("ports").Index(j)
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
			}
			if port.HostPort != 0 {
				for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
					errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
				}
			}
			if port.Name != "" {
				for _, msg := range validation.IsValidPortName(port.Name) {
					errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
				}
			}
			switch port.Protocol {
			case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
			default:
				errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, []string{"TCP", "UDP", "SCTP"}))
			}
		}
		for j, e := range c.Env {
			for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(cp.Child("env").Index(j).Child("name"), e.Name, msg))
			}
		}
		for j, m := range c.VolumeMounts {
			mp := cp.Child("volumeMounts").Index(j)
			if !volumes.Has(m.Name) {
				errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
			}
			if m.MountPath == "" {
				errs = append(errs, field.Required(mp.Child("mountPath"), ""))
			}
		}
		switch c.ImagePullPolicy {
		case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
		default:
			errs = append(errs, field.NotSupported(cp.Child("imagePullPolicy"), c.ImagePullPolicy, []string{"Always", "IfNotPresent", "Never"}))
		}
	}
	for i := range s.InitContainers {
		check(&s.InitContainers[i], p.Child("initContainers").Index(i))
	}
	for i := range s.Containers {
		check(&s.Containers[i], p.Child("containers").Index(i))
	}
	for i := range s.EphemeralContainers {
		check((*v1.Container)(&s.EphemeralContainers[i].EphemeralContainerCommon), p.Child("ephemeralContainers").Index(i))
	}

	switch s.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), s.RestartPolicy, []string{"Always", "OnFailure", "Never"}))
	}
	switch s.DNSPolicy {
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone:
	default:
		errs = append(errs, field.NotSupported(p.Child("dnsPolicy"), s.DNSPolicy, []string{"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"}))
	}
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be non-negative"))
	}
	return errs
}

// countVolumeSources counts the volume types set in vs (each is a pointer
// field), so a volume type added to the API later is counted too.
func countVolumeSources(vs *v1.VolumeSource) int {
	v := reflect.ValueOf(vs).Elem()
	n := 0
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}
