package podutil

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Annotations the kubelet puts on pods from its sources; the status manager
// and an operator read them back.
const (
	// ConfigSourceAnnotationKey names the source a pod came from
	// ("file", "http", "api").
	ConfigSourceAnnotationKey = "kubernetes.io/config.source"
	// ConfigMirrorAnnotationKey marks a mirror pod; its value is the static
	// pod's config hash.
	ConfigMirrorAnnotationKey = "kubernetes.io/config.mirror"
	// ConfigFirstSeenAnnotationKey holds when the agent first saw the pod.
	ConfigFirstSeenAnnotationKey = "kubernetes.io/config.seen"
	// ConfigHashAnnotationKey holds the hash of a static pod's content.
	ConfigHashAnnotationKey = "kubernetes.io/config.hash"
)

// Source names, as in the kubelet.
const (
	FileSource      = "file"
	HTTPSource      = "http"
	ApiserverSource = "api"
	// AllSource is the wildcard source of a SET carrying every pod.
	AllSource = "*"
)

// Source returns the pod's config.source annotation, or "".
func Source(pod *v1.Pod) string {
	if pod == nil {
		return ""
	}
	return pod.Annotations[ConfigSourceAnnotationKey]
}

// IsStaticPod reports whether the pod came from a source other than the
// apiserver (a manifest file or URL).
func IsStaticPod(pod *v1.Pod) bool {
	s := Source(pod)
	return s != "" && s != ApiserverSource
}

// IsMirrorPod reports whether the pod is the apiserver's mirror of a static pod.
func IsMirrorPod(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	_, ok := pod.Annotations[ConfigMirrorAnnotationKey]
	return ok
}

// FullName is the pod's "name_namespace", the key the kubelet uses where UIDs
// differ between a static pod and its mirror.
func FullName(pod *v1.Pod) string {
	return BuildFullName(pod.Name, pod.Namespace)
}

// BuildFullName joins name and namespace as FullName does.
func BuildFullName(name, namespace string) string {
	return name + "_" + namespace
}

// SystemCriticalPriority is the lowest priority of a critical pod
// (system-cluster-critical and system-node-critical have it or more).
const SystemCriticalPriority int32 = 2000000000

// IsCritical reports whether the kubelet treats the pod as critical
// (kubetypes.IsCriticalPod): static or mirror, or of priority
// SystemCriticalPriority or more. Such pods are admitted and kept even
// under pressure, preempting others if need be.
func IsCritical(pod *v1.Pod) bool {
	return IsStaticPod(pod) || IsMirrorPod(pod) ||
		(pod != nil && pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority)
}

// IsRestartableInitContainer reports whether an init container is a sidecar
// (restartPolicy Always): it keeps running beside the regular containers.
func IsRestartableInitContainer(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// ContainerShouldRestart reports whether a container (regular, or an init
// container that is not a sidecar) that exited with exitCode is started
// again, as the kubelet's with ContainerRestartRules (on by default): the
// first of its restartPolicyRules that matches the exit code decides if its
// action is Restart; then its own restartPolicy; then the pod's. The
// RestartAllContainers action is not supported: it falls through to the
// policies, as in the kubelet with that feature off.
func ContainerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		for _, r := range c.RestartPolicyRules {
			if ruleMatches(r, exitCode) {
				if r.Action == v1.ContainerRestartRuleActionRestart {
					return true
				}
				break // the first matching rule decides
			}
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	case v1.RestartPolicyNever:
		return false
	}
	return true // Always, and the API's default
}

// ContainerMayRestart reports whether a container is started again after
// it stops, where there is no exit code to match its rules against (killed
// by a failed probe, or in an unknown state): its own restartPolicy, else
// the pod's, is not Never.
func ContainerMayRestart(c *v1.Container, spec *v1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != v1.RestartPolicyNever
}

func ruleMatches(r v1.ContainerRestartRule, exitCode int32) bool {
	if r.ExitCodes == nil {
		return false
	}
	in := slices.Contains(r.ExitCodes.Values, exitCode)
	switch r.ExitCodes.Operator {
	case v1.ContainerRestartRuleOnExitCodesOpIn:
		return in
	case v1.ContainerRestartRuleOnExitCodesOpNotIn:
		return !in
	}
	return false
}
