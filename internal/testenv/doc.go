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
//
// A node agent owns its runtime as the kubelet owns its node: it stops pods
// no source wants and garbage-collects dead containers, including those of
// other tests sharing the runtime. Such a test calls ExclusiveCRIEndpoint,
// which waits until no other test (in any package's test binary) holds the
// runtime; CRIEndpoint holds it shared until its test ends.
package testenv
