package agent

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// countingRuntime counts the runtime's list and inspect calls.
type countingRuntime struct {
	*cri.Manager
	lists, inspects atomic.Int64
}

func (c *countingRuntime) GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error) {
	c.lists.Add(1)
	return c.Manager.GetPods(ctx, all)
}

func (c *countingRuntime) GetPodStatus(ctx context.Context, uid types.UID, name, ns string) (*runtime.PodStatus, error) {
	c.inspects.Add(1)
	return c.Manager.GetPodStatus(ctx, uid, name, ns)
}

// streams reports whether the runtime at endpoint streams container events
// (containerd 2.x does, 1.6 does not).
func streams(t testing.TB, m *cri.Manager) bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := m.WatchContainerEvents(ctx)
	if errors.Is(err, runtime.ErrNotSupported) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// eventedOnContainerd starts an agent on the real runtime, evented unless
// relist, and returns it with a CRI client to stop containers behind its
// back. It skips when the runtime cannot stream (containerd 1.6) unless
// NODEKIT_CRI_EVENTS=true says it must.
func eventedOnContainerd(t testing.TB, relist bool) (*running, *countingRuntime, runtimeapi.RuntimeServiceClient, string) {
	endpoint := testenv.ExclusiveCRIEndpoint(t)
	m, err := cri.New(context.Background(), cri.Config{Endpoint: endpoint, PodLogsRoot: t.TempDir(), PodsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if !streams(t, m) {
		if os.Getenv("NODEKIT_CRI_EVENTS") == "true" {
			t.Fatalf("the runtime at %s does not stream container events", endpoint)
		}
		t.Skipf("the runtime at %s does not stream container events (containerd 1.x); start containerd 2.x with hack/containerd2.sh", endpoint)
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rt := &countingRuntime{Manager: m}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	c := Config{NodeName: "evented-" + suffix, Runtime: rt, Sources: []string{src}, TerminateOnExit: true, EventedPLEG: !relist,
		ShutdownTimeout: 30 * time.Second, CrashLoopBackOffInitial: 10 * time.Millisecond, CrashLoopBackOffMax: 20 * time.Millisecond}
	r := start(t, c)
	if (r.a.evented == nil) != relist {
		t.Fatalf("evented PLEG %v with EventedPLEG %v", r.a.evented != nil, !relist)
	}
	return r, rt, runtimeapi.NewRuntimeServiceClient(conn), suffix
}

func sleeperPod(name, suffix string, policy v1.RestartPolicy) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix, Namespace: "default", UID: types.UID(name + "-" + suffix), CreationTimestamp: metav1.Now()},
		Spec: v1.PodSpec{RestartPolicy: policy, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []v1.Container{{Name: "app", Image: os.Getenv("NODEKIT_TEST_IMAGE"), ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"}}}},
	}
}

// TestEventedPLEGOnContainerd: on containerd 2.x the agent runs evented,
// and a container killed behind its back shows in the pod's status from the
// event stream, with no relist in between.
func TestEventedPLEGOnContainerd(t *testing.T) {
	r, rt, crt, suffix := eventedOnContainerd(t, false)
	pod := sleeperPod("evented", suffix, v1.RestartPolicyNever)
	r.a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}}
	waitFor(t, "pod running", func() bool { return r.phase(pod.UID) == v1.PodRunning })
	cid, err := runtime.ParseContainerID(r.pod(pod.UID).Status.ContainerStatuses[0].ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	lists := rt.lists.Load()
	if _, err := crt.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: cid.ID, Timeout: 0}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod failed from the exit event", func() bool { return r.phase(pod.UID) == v1.PodFailed })
	// Housekeeping lists every 2s; a 1s relist would add one a second.
	if n := rt.lists.Load() - lists; n > 2 {
		t.Errorf("%d GetPods calls between the kill and the status", n)
	}
}

// BenchmarkExitToStatusOnContainerd measures, on containerd 2.x, the time
// from a container's exit (a CRI StopContainer behind the agent's back) to
// the pod's status showing it, evented vs relist (1s), over 50 exits, and
// the runtime's list and inspect calls per pod per minute at steady state
// (10 running pods for 30s). Run with -benchtime=1x.
func BenchmarkExitToStatusOnContainerd(b *testing.B) {
	for _, mode := range []struct {
		name   string
		relist bool
	}{{"evented", false}, {"relist", true}} {
		b.Run(mode.name, func(b *testing.B) {
			for b.Loop() {
				r, rt, crt, suffix := eventedOnContainerd(b, mode.relist)
				pod := sleeperPod("latency", suffix, v1.RestartPolicyAlways)
				var pods []*v1.Pod
				for i := range 10 {
					pods = append(pods, sleeperPod("steady"+strconv.Itoa(i), suffix, v1.RestartPolicyAlways))
				}
				r.a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: append(pods, pod)}
				running := func() string {
					st, ok := r.a.Status().GetPodStatus(pod.UID)
					if !ok || len(st.ContainerStatuses) == 0 || st.ContainerStatuses[0].State.Running == nil {
						return ""
					}
					return st.ContainerStatuses[0].ContainerID
				}
				var lat []time.Duration
				for range 50 {
					var id string
					waitFor(b, "pod running", func() bool { id = running(); return id != "" })
					cid, _ := runtime.ParseContainerID(id)
					t0 := time.Now()
					if _, err := crt.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: cid.ID, Timeout: 0}); err != nil {
						b.Fatal(err)
					}
					for {
						st, _ := r.a.Status().GetPodStatus(pod.UID)
						cs := st.ContainerStatuses[0]
						if (cs.State.Terminated != nil && cs.State.Terminated.ContainerID == id) ||
							(cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ContainerID == id) {
							break
						}
						time.Sleep(time.Millisecond)
					}
					lat = append(lat, time.Since(t0))
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-median")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms-p99")

				// Steady state: the pods run, nothing changes.
				for _, p := range pods {
					waitFor(b, "pod running", func() bool { return r.phase(p.UID) == v1.PodRunning })
				}
				time.Sleep(5 * time.Second)
				l0, i0 := rt.lists.Load(), rt.inspects.Load()
				time.Sleep(30 * time.Second)
				n := float64(len(pods) + 1)
				b.ReportMetric(float64(rt.lists.Load()-l0)*2/n, "lists/pod/min")
				b.ReportMetric(float64(rt.inspects.Load()-i0)*2/n, "inspects/pod/min")
				r.stop()
			}
		})
	}
}
