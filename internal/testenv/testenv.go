package testenv

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"testing"
)

// Environment variables set by `hack/containerd.sh up`.
const (
	// EndpointEnv holds the CRI endpoint, for example unix:///tmp/x/containerd.sock.
	EndpointEnv = "NODEKIT_CRI_ENDPOINT"
	// TestImageEnv holds the name of a busybox image present in the runtime.
	TestImageEnv = "NODEKIT_TEST_IMAGE"
	// PauseImageEnv holds the name of the sandbox (pause) image.
	PauseImageEnv = "NODEKIT_PAUSE_IMAGE"
)

const startHint = `no containerd: run eval "$(bash hack/containerd.sh up)"`

// CRIEndpoint returns the CRI endpoint of the test runtime ($NODEKIT_CRI_ENDPOINT).
// When it is unset the test is skipped, or failed when $CI is "true".
// The test shares the runtime with other tests that call CRIEndpoint until
// it ends; an ExclusiveCRIEndpoint test waits for it.
func CRIEndpoint(t testing.TB) string {
	t.Helper()
	return holdRuntime(t, false)
}

// ExclusiveCRIEndpoint is CRIEndpoint for a test that takes the whole
// runtime, such as a node agent that kills pods it does not know: it waits
// until no other test holds the runtime and keeps it until the test ends.
// A test must not call both.
func ExclusiveCRIEndpoint(t testing.TB) string {
	t.Helper()
	return holdRuntime(t, true)
}

func holdRuntime(t testing.TB, exclusive bool) string {
	t.Helper()
	endpoint := lookup(t, EndpointEnv)
	if endpoint == "" {
		return ""
	}
	release, err := lockFile(lockPath(endpoint), exclusive, false)
	if err != nil {
		t.Fatalf("locking the runtime at %s: %v", endpoint, err)
		return ""
	}
	t.Cleanup(release)
	return endpoint
}

// lockPath is the lock file of an endpoint, in the temp directory so that
// it is writable whoever owns the socket's directory.
func lockPath(endpoint string) string {
	h := fnv.New64a()
	h.Write([]byte(endpoint))
	return filepath.Join(os.TempDir(), fmt.Sprintf("nodekit-cri-%x.lock", h.Sum64()))
}

// TestImage returns the busybox image to run in integration tests
// ($NODEKIT_TEST_IMAGE), skipping or failing as CRIEndpoint does.
func TestImage(t testing.TB) string {
	t.Helper()
	return lookup(t, TestImageEnv)
}

// PauseImage returns the sandbox image the runtime uses ($NODEKIT_PAUSE_IMAGE),
// skipping or failing as CRIEndpoint does.
func PauseImage(t testing.TB) string {
	t.Helper()
	return lookup(t, PauseImageEnv)
}

func lookup(t testing.TB, name string) string {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("$%s is not set but CI=true: the CI must start containerd first (%s)", name, startHint)
		return ""
	}
	t.Skipf("$%s is not set: %s", name, startHint)
	return ""
}
