// Package e2e holds nodekit's real-cluster tests: they run etcd and
// kube-apiserver (built from the Go module proxy by hack/servers.sh, cached by
// version) on loopback and drive nodekit's apiserver pod source, status
// manager and agent against them through client-go.
//
//	bash e2e/hack/servers.sh build   # once: ~5-10 min cold, then cached
//	cd e2e && go test -race -count=1 -timeout 30m ./...
//
// TestMain runs the build itself when the binaries are missing (mind go
// test's default 10m timeout on a cold machine). Without the binaries, and
// no way to build them, the tests skip; with CI=true they fail instead.
// $NODEKIT_E2E_ETCD and $NODEKIT_E2E_APISERVER name binaries to use instead.
package e2e
