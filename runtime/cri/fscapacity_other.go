//go:build !unix

package cri

func fsCapacity(string) uint64 { return 0 }
