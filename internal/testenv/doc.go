// Package testenv tells tests where the real container runtime is.
//
// Integration tests that need a CRI runtime (containerd started by
// hack/containerd.sh) call CRIEndpoint. Outside CI a missing runtime skips
// the test with the command that starts one; in CI (CI=true) it fails the
// test, so a broken CI set-up never passes silently.
//
//	eval "$(bash hack/containerd.sh up)"
//	go test ./runtime/cri/...
//
//	func TestRealPod(t *testing.T) {
//		endpoint := testenv.CRIEndpoint(t)
//		...
//	}
package testenv
