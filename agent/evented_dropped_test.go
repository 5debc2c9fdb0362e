package agent

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

// 1,000 pods started at once make the CRI runtime drop container events
// (fakecri, like containerd, drops them for a subscriber that lags). Under
// the evented PLEG every pod still gets exactly one container: no worker
// acts on status from before its own sync.
func TestEventedPLEGStartsOneContainerPerPodWhenEventsAreDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 pods; skipped with -short")
	}
	const n = 1000
	srv, err := fakecri.NewServer(fakecri.Config{})
	require.NoError(t, err)
	defer srv.Close()
	srv.Images.SetFakeImages([]string{benchImage})
	m, err := cri.New(context.Background(), cri.Config{Endpoint: srv.Endpoint(), PodLogsRoot: t.TempDir(), PodsRoot: t.TempDir()})
	require.NoError(t, err)
	defer m.Close()
	a, err := New(benchConfig(m, n))
	require.NoError(t, err)
	require.NotNil(t, a.evented, "fakecri streams events: the evented PLEG is on")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	pods := benchPods(0, n)
	a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: pods}
	waitAllRunning(t, a, pods)
	calls := srv.CallCounts()
	assert.Equal(t, n, calls["RunPodSandbox"], "sandboxes")
	assert.Equal(t, n, calls["CreateContainer"], "containers created (all calls: %v)", calls)
	assert.Equal(t, n, calls["StartContainer"], "containers started")
}
