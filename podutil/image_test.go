package podutil

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestPullPolicy(t *testing.T) {
	tests := []struct {
		name   string
		image  string
		policy v1.PullPolicy
		want   v1.PullPolicy
	}{
		{"untagged image is always pulled", "busybox", "", v1.PullAlways},
		{"latest is always pulled", "busybox:latest", "", v1.PullAlways},
		{"tagged image is pulled if not present", "busybox:1.36", "", v1.PullIfNotPresent},
		{"registry port is not a tag", "registry:5000/busybox", "", v1.PullAlways},
		{"tag after a registry port counts", "registry:5000/busybox:1", "", v1.PullIfNotPresent},
		{"latest after a registry port is always pulled", "registry:5000/busybox:latest", "", v1.PullAlways},
		{"digest is pulled if not present", "busybox@sha256:0123456789ab", "", v1.PullIfNotPresent},
		{"explicit policy wins over the tag", "busybox:latest", v1.PullNever, v1.PullNever},
		{"explicit policy wins over a digest", "busybox@sha256:0123456789ab", v1.PullAlways, v1.PullAlways},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1.Container{Image: tt.image, ImagePullPolicy: tt.policy}
			if got := PullPolicy(c); got != tt.want {
				t.Errorf("PullPolicy(%q, %q) = %q, want %q", tt.image, tt.policy, got, tt.want)
			}
		})
	}
}
