package volume

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// The group bits SetVolumeOwnership adds: read-write (read-only for a
// read-only volume) on everything, search on directories.
const (
	rwMask   = fs.FileMode(0o660)
	roMask   = fs.FileMode(0o440)
	execMask = fs.FileMode(0o110)
)

// SetVolumeOwnership gives the volume at dir to the pod's fsGroup, as the
// kubelet's SetVolumeOwnership (pkg/volume/volume_linux.go): every file and
// directory under dir, dir included, belongs to group fsGroup and is group
// readable and writable (readable only when readOnly), directories are
// group-searchable and setgid, so that files the pod creates get the group.
// Symbolic links are re-grouped but not chmod-ed (that would change their
// targets). With policy OnRootMismatch nothing is done when dir already has
// the group, the bits and setgid; with Always (or nil) the whole tree is
// walked. A nil fsGroup changes nothing. A file that cannot be changed does
// not stop the walk, as the kubelet's; an unreadable tree is an error.
func SetVolumeOwnership(dir string, fsGroup *int64, policy *v1.PodFSGroupChangePolicy, readOnly bool) error {
	if fsGroup == nil {
		return nil
	}
	if policy != nil && *policy == v1.FSGroupChangeOnRootMismatch && !rootMismatch(dir, *fsGroup, readOnly) {
		return nil
	}
	mask := rwMask
	if readOnly {
		mask = roMask
	}
	return filepath.Walk(dir, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		_ = os.Lchown(p, -1, int(*fsGroup))
		if info.Mode()&fs.ModeSymlink != 0 {
			return nil
		}
		m := mask
		if info.IsDir() {
			m |= execMask | fs.ModeSetgid
		}
		_ = os.Chmod(p, chmodBits(info.Mode())|m)
		return nil
	})
}

// chmodBits are the bits of mode that chmod(2) sets.
func chmodBits(mode fs.FileMode) fs.FileMode {
	return mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// rootMismatch reports whether dir lacks the group, the group bits or
// setgid that SetVolumeOwnership gives it (or is not a directory).
func rootMismatch(dir string, fsGroup int64, readOnly bool) bool {
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() {
		return true
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || int64(st.Gid) != fsGroup {
		return true
	}
	want := rwMask
	if readOnly {
		want = roMask
	}
	want |= execMask
	return info.Mode().Perm()&want != want || info.Mode()&fs.ModeSetgid == 0
}
