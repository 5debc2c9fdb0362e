//go:build !unix

package cri

type fsInfo struct{ capacity, available, inodes, inodesFree uint64 }

func statFs(string) fsInfo { return fsInfo{} }
