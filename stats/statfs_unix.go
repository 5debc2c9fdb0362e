//go:build unix

package stats

import "syscall"

// fsInfo is statfs of the filesystem holding path.
func fsInfo(path string) (capacity, available, used, inodes, inodesFree uint64, err error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(path, &s); err != nil {
		return 0, 0, 0, 0, 0, err
	}
	bs := uint64(s.Bsize)
	return s.Blocks * bs, s.Bavail * bs, (s.Blocks - s.Bfree) * bs, s.Files, s.Ffree, nil
}
