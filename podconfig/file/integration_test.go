package file

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podutil"
)

// Through the mux, editing a manifest replaces the pod: its UID is a hash of
// the content, as in the kubelet.
func TestEditedManifestReplacesThePodThroughTheMux(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yaml")
	require.NoError(t, os.WriteFile(path, []byte(manifest("web", "nginx:1")), 0o644))

	ctx, cancel := context.WithCancel(context.Background())
	cfg, err := podconfig.NewPodConfig(podconfig.Incremental, podconfig.Options{})
	require.NoError(t, err)
	src, err := New(Config{Path: dir, NodeName: "node", Clock: clocktesting.NewFakeClock(time.Unix(0, 0))})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { _ = src.Run(ctx, cfg.Channel(ctx, podutil.FileSource)); close(done) }()
	defer func() { cancel(); <-done }()

	next := func() podconfig.PodUpdate {
		select {
		case u := <-cfg.Updates():
			return u
		case <-time.After(waitTimeout):
			t.Fatal("no update")
		}
		return podconfig.PodUpdate{}
	}
	u := next()
	require.Equal(t, podconfig.ADD, u.Op)
	first := u.Pods[0]
	assert.Equal(t, podutil.FileSource, first.Annotations[podutil.ConfigSourceAnnotationKey])
	assert.NotEmpty(t, first.Annotations[podutil.ConfigFirstSeenAnnotationKey])
	assert.True(t, podutil.IsStaticPod(first))

	writeAtomic(t, path, manifest("web", "nginx:2"))
	u = next()
	require.Equal(t, podconfig.REMOVE, u.Op)
	assert.Equal(t, first.UID, u.Pods[0].UID)
	u = next()
	require.Equal(t, podconfig.ADD, u.Op)
	assert.NotEqual(t, first.UID, u.Pods[0].UID)
	assert.Equal(t, "nginx:2", u.Pods[0].Spec.Containers[0].Image)
}
