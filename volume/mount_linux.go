package volume

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// SystemMounter mounts with mount(2); it needs CAP_SYS_ADMIN.
type SystemMounter struct{}

// MountTmpfs implements Mounter. The tmpfs's root is 1777, the tmpfs
// default the kubelet's mounts keep: anyone may write, only owners remove.
func (SystemMounter) MountTmpfs(dir string, sizeBytes int64) error {
	opts := "mode=1777"
	if sizeBytes > 0 {
		opts += fmt.Sprintf(",size=%d", sizeBytes)
	}
	return syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts)
}

// Unmount implements Mounter.
func (SystemMounter) Unmount(dir string) error { return syscall.Unmount(dir, 0) }

// IsMountPoint implements Mounter: dir is a mount point when it lies on
// another device than its parent.
func (SystemMounter) IsMountPoint(dir string) (bool, error) {
	var st, parent syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		if os.IsNotExist(err) {
			return false, nil
		}
		return false, err
	}
	if err := syscall.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}
