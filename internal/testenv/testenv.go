package testenv

import (
	"os"
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
func CRIEndpoint(t testing.TB) string {
	t.Helper()
	return lookup(t, EndpointEnv)
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
