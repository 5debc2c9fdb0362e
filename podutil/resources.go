package podutil

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// IsExtendedResourceName is the kubelet's v1helper.IsExtendedResourceName:
// a name with a domain outside kubernetes.io, not "requests."-prefixed,
// that makes a valid quota name (example.com/gpu).
func IsExtendedResourceName(name v1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+s)) == 0
}
