package agent

import (
	"context"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/runtime/cri"
)

// TestProbesOnContainerd runs probes against real containers: an exec
// liveness probe that starts failing restarts its container, and an HTTP
// readiness probe against busybox's httpd in the pod flips Ready on and
// off as the page appears and goes, and an exec probe past its timeout
// fails with the kubelet's message.
func TestProbesOnContainerd(t *testing.T) {
	endpoint := testenv.ExclusiveCRIEndpoint(t)
	image := testenv.TestImage(t)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	ctx := context.Background()
	m, err := cri.New(ctx, cri.Config{Endpoint: endpoint, PodLogsRoot: t.TempDir(), PodsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rec := podconfigtest.NewRecorder(0)
	c := Config{NodeName: "probes-" + suffix, Runtime: m, Sources: []string{src}, Recorder: rec, TerminateOnExit: true,
		ShutdownTimeout: 30 * time.Second, CrashLoopBackOffInitial: time.Second, CrashLoopBackOffMax: 2 * time.Second}
	r := start(t, c)

	mk := func(name string, ctr v1.Container) *v1.Pod {
		ctr.Image, ctr.ImagePullPolicy = image, v1.PullIfNotPresent
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix, Namespace: "default", UID: types.UID(name + "-" + suffix),
				CreationTimestamp: metav1.Now()},
			Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []v1.Container{ctr}},
		}
	}
	live := mk("liveness", v1.Container{Name: "app",
		Command: []string{"sh", "-c", "touch /tmp/healthy; sleep 4; rm /tmp/healthy; exec sleep 3600"},
		LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
			PeriodSeconds: 1, TimeoutSeconds: 2, FailureThreshold: 2, SuccessThreshold: 1},
	})
	web := mk("httpd", v1.Container{Name: "web",
		Command: []string{"sh", "-c", "mkdir -p /www; httpd -p 8080 -h /www; sleep 4; echo ok > /www/ready; sleep 6; rm /www/ready; exec sleep 3600"},
		Ports:   []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
			PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1},
	})
	slow := mk("slow", v1.Container{Name: "slow", Command: []string{"sleep", "3600"},
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"sleep", "10"}}},
			PeriodSeconds: 2, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1},
	})
	r.a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{live, web, slow}}

	ready := func() v1.ConditionStatus {
		if p := r.pod(web.UID); p != nil {
			return condition(p, v1.PodReady)
		}
		return ""
	}
	waitFor(t, "the web pod running and not ready", func() bool {
		p := r.pod(web.UID)
		return p != nil && p.Status.Phase == v1.PodRunning && ready() == v1.ConditionFalse
	})
	waitFor(t, "the web pod ready once /ready is served", func() bool { return ready() == v1.ConditionTrue })
	waitFor(t, "the web pod unready once /ready is gone", func() bool { return ready() == v1.ConditionFalse })
	if got := events(rec, "Unhealthy"); len(got) == 0 {
		t.Error("no Unhealthy event for the failing readiness probe")
	} else {
		t.Logf("Unhealthy: %q", got[0])
	}

	waitFor(t, "the liveness pod's container restarted", func() bool {
		p := r.pod(live.UID)
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	found := false
	for _, m := range events(rec, "Killing") {
		found = found || m == "Container app failed liveness probe, will be restarted"
	}
	if !found {
		t.Errorf("Killing events %q, want the liveness one", events(rec, "Killing"))
	}
	timedOut := false
	waitFor(t, "an exec probe past its timeout reported", func() bool {
		for _, m := range events(rec, "Unhealthy") {
			timedOut = timedOut || m == `Readiness probe failed: command "sleep 10" timed out`
		}
		return timedOut
	})
	if p := r.pod(slow.UID); p == nil || condition(p, v1.PodReady) != v1.ConditionFalse {
		t.Error("the pod whose readiness command times out is not unready")
	}
	r.stop()
}
