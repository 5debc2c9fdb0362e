//go:build !linux

package volume

import "errors"

// SystemMounter cannot mount on this platform.
type SystemMounter struct{}

var errNoTmpfs = errors.New("tmpfs mounts are only supported on Linux")

// MountTmpfs implements Mounter.
func (SystemMounter) MountTmpfs(string, int64) error { return errNoTmpfs }

// Unmount implements Mounter.
func (SystemMounter) Unmount(string) error { return errNoTmpfs }

// IsMountPoint implements Mounter.
func (SystemMounter) IsMountPoint(string) (bool, error) { return false, nil }
