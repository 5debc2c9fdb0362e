// Package mock is virtual-kubelet v1.14.1's mock provider,
// cmd/virtual-kubelet/internal/provider/mock/mock.go copied byte for byte
// (an internal package, so it cannot be imported); Copyright The
// Virtual Kubelet Authors, Apache License 2.0. e2e runs it unchanged under
// virtual-kubelet and under nodekit (TestMockProviderSideBySide). Do not
// edit mock.go: replace it with the upstream file of the version in
// go.mod.
package mock
