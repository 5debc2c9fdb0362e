package agent

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
	"github.com/nodekit/nodekit/runtime/fake"
)

// benchConfig is the whole-pipeline benchmarks' agent: the real clock with
// the kubelet's periods shortened where they pace a pod's way to Running
// (the relist that reports the started containers) and lengthened where
// they would only add load (resyncs, runtime checks).
func benchConfig(rt runtime.Runtime, n int) Config {
	return Config{
		NodeName:           "n1",
		Runtime:            rt,
		Sources:            []string{src},
		MaxPods:            n,
		RelistPeriod:       100 * time.Millisecond,
		RuntimeCheckPeriod: 5 * time.Second,
		SyncFrequency:      time.Minute,
	}
}

// pipelineRuntime is one runtime under the pipeline benchmark: calls counts
// the runtime calls so far (CRI calls for the CRI manager).
type pipelineRuntime struct {
	rt    runtime.Runtime
	calls func() int
	close func()
}

// BenchmarkPipeline runs 1,000 pods from a SET on a source to Running with
// a generated API status, through podconfig, syncloop, podworkers, pleg,
// status and the runtime: (a) runtime/fake, (b) the CRI manager over gRPC to
// fakecri in this process, (c) the same with fakecri in a child process, so
// that time and allocations are the agent's alone, as with a real runtime.
// One op is the whole 1,000. Besides time and allocations it
// reports the heap retained per pod once they settle (agent, runtime and, for
// cri, the fake server), the goroutine stacks per pod
// (not in the heap: mostly the pod workers', a goroutine per pod with work), runtime
// calls per pod (CRI calls for cri) and the wall time to all Running.
func BenchmarkPipeline(b *testing.B) {
	const n = 1000
	variants := []struct {
		name string
		make func(b *testing.B) pipelineRuntime
		// metrics registers the agent's metrics: the cost of
		// instrumentation is the difference to the variant without
		metrics bool
	}{
		{"fake", func(b *testing.B) pipelineRuntime {
			rt, err := fake.New(fake.Config{Images: []string{benchImage}})
			if err != nil {
				b.Fatal(err)
			}
			return pipelineRuntime{rt: rt, calls: func() int { return fakeCalls(rt) }, close: func() {}}
		}, false},
		{"fake+metrics", func(b *testing.B) pipelineRuntime {
			rt, err := fake.New(fake.Config{Images: []string{benchImage}})
			if err != nil {
				b.Fatal(err)
			}
			return pipelineRuntime{rt: rt, calls: func() int { return fakeCalls(rt) }, close: func() {}}
		}, true},
		{"cri", func(b *testing.B) pipelineRuntime {
			srv, err := fakecri.NewServer(fakecri.Config{})
			if err != nil {
				b.Fatal(err)
			}
			srv.Images.SetFakeImages([]string{benchImage})
			m, err := cri.New(context.Background(), cri.Config{Endpoint: srv.Endpoint(), PodLogsRoot: b.TempDir(), PodsRoot: b.TempDir()})
			if err != nil {
				srv.Close()
				b.Fatal(err)
			}
			return pipelineRuntime{rt: m, calls: srv.TotalCalls, close: func() {
				if testing.Verbose() {
					b.Logf("CRI calls: %v", srv.CallCounts())
				}
				m.Close()
				srv.Close()
			}}
		}, false},
		{"cri-child", func(b *testing.B) pipelineRuntime {
			srv := startFakeCRIChild(b)
			m, err := cri.New(context.Background(), cri.Config{Endpoint: srv.endpoint, PodLogsRoot: b.TempDir(), PodsRoot: b.TempDir()})
			if err != nil {
				srv.close()
				b.Fatal(err)
			}
			return pipelineRuntime{rt: m, calls: srv.calls, close: func() {
				m.Close()
				srv.close()
			}}
		}, false},
	}
	for _, v := range variants {
		b.Run(fmt.Sprintf("%s/pods=%d", v.name, n), func(b *testing.B) {
			pods := make([][]*v1.Pod, b.N)
			for i := range pods {
				pods[i] = benchPods(i, n)
			}
			var retained, stacks, calls, wall float64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				goruntime.GC()
				var before, after goruntime.MemStats
				goruntime.ReadMemStats(&before)
				prt := v.make(b)
				cfg := benchConfig(prt.rt, n)
				if v.metrics {
					cfg.Registerer = prometheus.NewRegistry()
				}
				a, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				c0 := prt.calls()
				b.StartTimer()

				start := time.Now()
				go func() { done <- a.Run(ctx) }()
				a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: pods[i]}
				waitAllRunning(b, a, pods[i])
				wall += time.Since(start).Seconds()

				b.StopTimer()
				calls += float64(prt.calls() - c0)
				pods[i] = nil // the agent's copies are what is retained
				goruntime.GC()
				goruntime.ReadMemStats(&after)
				retained += float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
				stacks += float64(int64(after.StackInuse) - int64(before.StackInuse))
				cancel()
				<-done
				prt.close()
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(retained/float64(b.N*n), "retained-B/pod")
			b.ReportMetric(stacks/float64(b.N*n), "stack-B/pod")
			b.ReportMetric(calls/float64(b.N*n), "calls/pod")
			b.ReportMetric(wall/float64(b.N), "s-to-running")
		})
	}
}

func fakeCalls(rt *fake.Runtime) int {
	t := 0
	for _, m := range []string{"SyncPod", "KillPod", "GetPods", "GetPodStatus", "Status", "Version", "GarbageCollect", "PullImage", "ListImages", "RemoveImage", "WatchContainerEvents"} {
		t += rt.CallCount(m)
	}
	return t
}

// benchImage is present on the runtimes from the start: the benchmark
// measures the pipeline, not image pulls.
const benchImage = "registry.local/app:1"

func benchPods(round, n int) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		p := newPod(fmt.Sprintf("r%d-p%04d", round, i), v1.RestartPolicyAlways, "app")
		p.Spec.Containers[0].Image, p.Spec.Containers[0].ImagePullPolicy = benchImage, v1.PullIfNotPresent
		pods[i] = p
	}
	return pods
}

// waitAllRunning polls the status manager until every pod's generated status
// is Running with its container running. Pods stay Running here, so it
// checks each pod until it is, then moves on: a poll costs little.
func waitAllRunning(b *testing.B, a *Agent, pods []*v1.Pod) {
	deadline := time.Now().Add(time.Minute)
	next := 0
	for next < len(pods) {
		st, ok := a.status.SharedPodStatus(pods[next].UID)
		if ok && st.Phase == v1.PodRunning && len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Running != nil {
			next++
			continue
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d pods running after a minute", next, len(pods))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkCRICallFloor is one CRI call with the smallest messages (Version)
// over gRPC to fakecri in a child process, bounded by a timeout as the CRI
// manager bounds each call: the client's cost of a call before any message
// content, which BenchmarkPipeline/cri-child pays 6 times per pod.
func BenchmarkCRICallFloor(b *testing.B) {
	srv := startFakeCRIChild(b)
	defer srv.close()
	conn, err := grpc.NewClient(srv.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	call := func() {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if _, err := rt.Version(cctx, &runtimeapi.VersionRequest{}); err != nil {
			b.Fatal(err)
		}
	}
	call() // connect
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		call()
	}
}

// BenchmarkOnePodAtTheKubeletRelistPeriod is one pod's way to Running and,
// once deleted, to its containers stopped, at the kubelet's 1s relist
// period on runtime/fake: what is left is the agent's pacing, not the
// runtime's work. The kubelet waits for the periodic relist at both steps
// (0.5s each on average); the agent asks for a relist instead. It reports
// the seconds to Running and to stopped per pod.
func BenchmarkOnePodAtTheKubeletRelistPeriod(b *testing.B) {
	rt, err := fake.New(fake.Config{Images: []string{benchImage}})
	if err != nil {
		b.Fatal(err)
	}
	c := benchConfig(rt, 110)
	c.RelistPeriod = time.Second
	c.RelistOnRequest = true
	r := start(b, c)
	var toRunning, toStopped time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pod := newPod(fmt.Sprintf("one-%d", i), v1.RestartPolicyAlways, "c")
		t0 := time.Now()
		r.set(pod)
		waitFor(b, "running", func() bool { return r.phase(pod.UID) == v1.PodRunning })
		t1 := time.Now()
		deleting := pod.DeepCopy()
		now := metav1.Now()
		deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, ptr.To[int64](0)
		r.set(deleting)
		waitFor(b, "stopped", func() bool {
			st, err := rt.GetPodStatus(context.Background(), pod.UID, "", "")
			return err == nil && len(st.RunningContainerStatuses()) == 0
		})
		toRunning, toStopped = toRunning+t1.Sub(t0), toStopped+time.Since(t1)
		r.set() // the source forgets it
	}
	b.ReportMetric(toRunning.Seconds()/float64(b.N), "s-to-running/pod")
	b.ReportMetric(toStopped.Seconds()/float64(b.N), "s-to-stopped/pod")
}
