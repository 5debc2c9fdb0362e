//go:build !linux

package volume

import v1 "k8s.io/api/core/v1"

// SetVolumeOwnership is the kubelet's on Linux; elsewhere volumes keep
// their owners, as the kubelet's on Windows.
func SetVolumeOwnership(dir string, fsGroup *int64, policy *v1.PodFSGroupChangePolicy, readOnly bool) error {
	return nil
}
