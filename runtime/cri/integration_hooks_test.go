package cri_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// TestLifecycleHooksOnContainerd: a postStart exec hook writes a file the
// container waits for and prints; a preStop httpGet to the pod's IP (no
// host given) reaches the busybox httpd of the pod's other container
// before the containers stop; the hooked container's events are the
// kubelet's, in order.
func TestLifecycleHooksOnContainerd(t *testing.T) {
	endpoint := testenv.CRIEndpoint(t)
	image := testenv.TestImage(t)
	rec := &podconfigtest.Recorder{}
	logs := t.TempDir()
	m, err := cri.New(context.Background(), cri.Config{Endpoint: endpoint, PodLogsRoot: logs, PodsRoot: t.TempDir(), Recorder: rec})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()

	pod := realPod("hooks", image, func(p *v1.Pod) {
		// httpd as PID 1 ignores TERM, so it serves until the grace period
		// ends, whichever container is stopped first.
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
		p.Spec.Containers = []v1.Container{
			{Name: "app", Image: image, ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sh", "-c", "until [ -f /tmp/poststart ]; do sleep 0.1; done; echo saw $(cat /tmp/poststart); exec sleep 3600"},
				Lifecycle: &v1.Lifecycle{
					PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo hook-wrote > /tmp/poststart"}}},
					PreStop:   &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/prestop", Port: intstr.FromString("web")}},
				},
				Ports: []v1.ContainerPort{{Name: "web", ContainerPort: 8080}}},
			{Name: "web", Image: image, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"httpd", "-f", "-vv", "-p", "8080", "-h", "/"}},
		}
	})
	cleanup(t, m, pod)
	st := syncUntil(t, ctx, m, pod, nil, 50, 100*time.Millisecond, running("app", "web"))
	require.Len(t, st.IPs, 1)
	dir := logDir(logs, pod)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "app", "0.log"))
		return err == nil && strings.Contains(string(b), "saw hook-wrote")
	}, logWait, 50*time.Millisecond, "the container sees what its postStart hook wrote")

	require.NoError(t, m.KillPod(ctx, pod, podOf(st), nil))
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "web", "0.log"))
		return err == nil && strings.Contains(string(b), "url:/prestop")
	}, logWait, 50*time.Millisecond, "the preStop hook reached httpd")

	var app []string
	for _, e := range rec.Events() {
		if ref, ok := e.Object.(*v1.ObjectReference); ok && ref.FieldPath == "spec.containers{app}" {
			app = append(app, e.Reason)
		}
		require.NotEqual(t, v1.EventTypeWarning, e.Type, "%s: %s", e.Reason, e.Message)
	}
	require.Equal(t, []string{runtime.EventPulled, runtime.EventCreated, runtime.EventStarted, runtime.EventKilling}, app)
}
