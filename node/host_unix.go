//go:build unix

package node

import "syscall"

// fsCapacity is the size in bytes of the file system holding dir, or 0.
func fsCapacity(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Blocks) * int64(st.Bsize)
}
