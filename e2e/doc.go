// Package e2e holds nodekit's real-cluster tests: they run etcd and
// kube-apiserver (built from the Go module proxy by hack/servers.sh, cached by
// version) on loopback and drive nodekit's apiserver pod source, status
// manager and agent against them through client-go.
//
//	cd e2e && go test -count=1 -timeout 30m ./...
//
// Without the binaries (and no way to build them) the tests skip; with
// CI=true they fail instead.
package e2e
