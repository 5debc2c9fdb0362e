// Package eviction is the kubelet's node-pressure eviction manager
// (pkg/kubelet/eviction): it watches the node's signals in the Summary
// API, reports MemoryPressure, DiskPressure and PIDPressure, reclaims
// node-level resources and evicts pods so the node protects itself before
// the kernel does.
package eviction
