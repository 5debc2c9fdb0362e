package podenv

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/podutil"
)

// ErrUnsupportedField is wrapped when a fieldRef or resourceFieldRef names
// something the downward API does not offer.
var ErrUnsupportedField = errors.New("podenv: unsupported downward API field")

// FieldValue returns the value of a fieldRef (metadata.name,
// metadata.labels['k'], status.podIP, ...) for pod, as the kubelet's
// podFieldSelectorRuntimeValue. hostIPs are primary first; podIPs are the
// runtime's, in any order, and picked as the kubelet's sortPodIPs does (one
// per family, the node's primary family first); status.podIP(s) of a
// host-network pod are its host IPs.
func FieldValue(fs *v1.ObjectFieldSelector, pod *v1.Pod, podIPs, hostIPs []string) (string, error) {
	if fs.APIVersion != "" && fs.APIVersion != "v1" {
		return "", fmt.Errorf("unsupported pod version: %s: %w", fs.APIVersion, ErrUnsupportedField)
	}
	if len(podIPs) == 0 && pod.Spec.HostNetwork {
		podIPs = hostIPs
	}
	switch fs.FieldPath {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		if len(hostIPs) == 0 {
			return "", fmt.Errorf("%s: the node's IP is not known (no host IPs configured)", fs.FieldPath)
		}
		if fs.FieldPath == "status.hostIP" {
			return hostIPs[0], nil
		}
		return strings.Join(hostIPs, ","), nil
	case "status.podIP":
		podIPs = podutil.SortPodIPs(podIPs, hostIPs)
		if len(podIPs) == 0 {
			return "", nil
		}
		return podIPs[0], nil
	case "status.podIPs":
		return strings.Join(podutil.SortPodIPs(podIPs, hostIPs), ","), nil
	}
	return MetadataValue(pod, fs.FieldPath)
}

// MetadataValue returns a metadata field of pod as the downward API writes it:
// metadata.name, .namespace, .uid, .labels and .annotations (all of them,
// one k="v" a line, sorted), or one of them as metadata.labels['k'].
func MetadataValue(pod *v1.Pod, path string) (string, error) {
	if p, key, ok := subscript(path); ok {
		switch p {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	return "", fmt.Errorf("field path %q: %w", path, ErrUnsupportedField)
}

// subscript splits "p['key']" into p and key.
func subscript(path string) (string, string, bool) {
	i := strings.Index(path, "['")
	if i < 0 || !strings.HasSuffix(path, "']") || i+2 > len(path)-2 {
		return "", "", false
	}
	return path[:i], path[i+2 : len(path)-2], true
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(m[k]))
	}
	return b.String()
}

// ResourceValue returns the value of a resourceFieldRef for container c of
// pod (or the container fs names), as the kubelet: limits that are not set
// are the pod's limits, then the node's allocatable; the value is divided by
// the divisor (default 1) and rounded up.
func ResourceValue(fs *v1.ResourceFieldSelector, pod *v1.Pod, c *v1.Container, allocatable v1.ResourceList) (string, error) {
	if fs.ContainerName != "" {
		c = findContainer(pod, fs.ContainerName)
		if c == nil {
			return "", fmt.Errorf("container %s not found", fs.ContainerName)
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef %q without a container", fs.Resource)
	}
	divisor := fs.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, ok := strings.Cut(fs.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported container resource : %v: %w", fs.Resource, ErrUnsupportedField)
	}
	rn := v1.ResourceName(name)
	switch {
	case rn == v1.ResourceCPU, rn == v1.ResourceMemory, rn == v1.ResourceEphemeralStorage:
	case strings.HasPrefix(name, v1.ResourceHugePagesPrefix):
	default:
		return "", fmt.Errorf("unsupported container resource : %v: %w", fs.Resource, ErrUnsupportedField)
	}
	var q resource.Quantity
	if kind == "requests" {
		q = c.Resources.Requests[rn]
	} else {
		q = c.Resources.Limits[rn]
		if q.IsZero() && !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
			// Hugepages are never overcommitted: they always have a limit.
			if pl, ok := podLimit(pod, rn); ok {
				q = pl
			} else {
				q = allocatable[rn]
			}
		}
	}
	if rn == v1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// podLimit is the pod-level limit of rn, which caps what a container without
// a limit of its own may use.
func podLimit(pod *v1.Pod, rn v1.ResourceName) (resource.Quantity, bool) {
	if pod == nil || pod.Spec.Resources == nil || rn == v1.ResourceEphemeralStorage {
		return resource.Quantity{}, false
	}
	q, ok := pod.Spec.Resources.Limits[rn]
	return q, ok && !q.IsZero()
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	if pod == nil {
		return nil
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
