//go:build !unix

package stats

import "errors"

func fsInfo(string) (capacity, available, used, inodes, inodesFree uint64, err error) {
	return 0, 0, 0, 0, 0, errors.New("statfs is not supported on this platform")
}
