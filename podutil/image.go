package podutil

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// PullPolicy is c's image pull policy, or, when it is empty, the API server's
// default: Always for an image without a digest whose tag is "latest" or
// absent, IfNotPresent otherwise. Static pods are defaulted with it, and
// runtimes use it for containers whose spec was never defaulted.
func PullPolicy(c *v1.Container) v1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	image := c.Image
	if strings.Contains(image, "@") {
		return v1.PullIfNotPresent
	}
	tag := ""
	// A colon before the last slash is a registry port, not a tag.
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		tag = image[i+1:]
	}
	if tag == "" || tag == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
