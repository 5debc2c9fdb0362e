package agent

import (
	"context"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// TestGarbageCollectionOnContainerd: a crash-looping container's dead
// instances beyond the kubelet's policy disappear while its restart count
// stays, and the image filesystem is reported for image GC (whose removals
// are not tried here: the runtime's images are shared with other tests).
func TestGarbageCollectionOnContainerd(t *testing.T) {
	endpoint := testenv.ExclusiveCRIEndpoint(t)
	image := testenv.TestImage(t)
	ctx := context.Background()
	m, err := cri.New(ctx, cri.Config{Endpoint: endpoint, PodLogsRoot: t.TempDir(), PodsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fs, err := m.ImageFsInfo(ctx)
	if err != nil || fs.UsedBytes == 0 || fs.CapacityBytes < fs.UsedBytes {
		t.Fatalf("ImageFsInfo = %+v, %v; want usage within a known capacity", fs, err)
	}

	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	c := Config{NodeName: "gc-" + suffix, Runtime: m, Sources: []string{src}, TerminateOnExit: true, ShutdownTimeout: 30 * time.Second,
		CrashLoopBackOffInitial: 100 * time.Millisecond, CrashLoopBackOffMax: 200 * time.Millisecond, ContainerGCPeriod: time.Second}
	r := start(t, c)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gc-" + suffix, Namespace: "default", UID: types.UID("gc-" + suffix), CreationTimestamp: metav1.Now()},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []v1.Container{{Name: "crash", Image: image, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", "exit 1"}}}},
	}
	r.a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
	restarts := func() int32 {
		if p := r.pod(pod.UID); p != nil && len(p.Status.ContainerStatuses) == 1 {
			return p.Status.ContainerStatuses[0].RestartCount
		}
		return 0
	}
	waitFor(t, "four restarts", func() bool { return restarts() >= 4 })
	waitFor(t, "dead containers collected down to the policy", func() bool {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		dead := 0
		for _, cs := range st.ContainerStatuses {
			if cs.State != runtime.ContainerStateRunning {
				dead++
			}
		}
		return dead <= 2
	})
	if n := restarts(); n < 4 {
		t.Fatalf("restart count %d after collection, want it kept (>= 4)", n)
	}
}
