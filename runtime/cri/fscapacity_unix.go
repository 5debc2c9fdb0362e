//go:build unix

package cri

import "syscall"

// fsCapacity is the size in bytes of the filesystem at path, 0 if unknown.
func fsCapacity(path string) uint64 {
	var s syscall.Statfs_t
	if err := syscall.Statfs(path, &s); err != nil {
		return 0
	}
	return s.Blocks * uint64(s.Bsize)
}
