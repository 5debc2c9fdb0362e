//go:build unix

package cri

import "syscall"

// fsInfo is a filesystem's size, free space and inodes; zero if unknown.
type fsInfo struct{ capacity, available, inodes, inodesFree uint64 }

// statFs describes the filesystem at path.
func statFs(path string) fsInfo {
	var s syscall.Statfs_t
	if err := syscall.Statfs(path, &s); err != nil {
		return fsInfo{}
	}
	bs := uint64(s.Bsize)
	return fsInfo{capacity: s.Blocks * bs, available: s.Bavail * bs, inodes: s.Files, inodesFree: s.Ffree}
}
