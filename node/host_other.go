//go:build !unix

package node

// fsCapacity is unknown off unix: ephemeral-storage is then left out unless
// Config.Capacity sets it.
func fsCapacity(string) int64 { return 0 }
