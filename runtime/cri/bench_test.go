package cri_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
	"github.com/nodekit/nodekit/server/streaming/streamingtest"
)

func benchPod(i int, image string) *v1.Pod {
	name := fmt.Sprintf("bench-%d", i)
	p := newPod(name, image)
	p.UID = types.UID("uid-" + name)
	return p
}

// BenchmarkSyncPodStart starts a one-container pod on the fake CRI server;
// calls/op counts the CRI round trips (the floor is 4).
func BenchmarkSyncPodStart(b *testing.B) {
	e := newFakeEnv(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pod := benchPod(i, "busybox:1")
		st := &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
		res := e.m.SyncPod(e.ctx, pod, st, nil, nil)
		if err := res.Error(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(e.srv.TotalCalls())/float64(b.N), "calls/op")
}

// BenchmarkGetPodStatus inspects a running two-container pod, as the PLEG
// does on every relist of a changed pod.
func BenchmarkGetPodStatus(b *testing.B) {
	e := newFakeEnv(b)
	pod := newPod("st", "busybox:1", twoContainers)
	res := e.m.SyncPod(e.ctx, pod, nil, nil, nil)
	if err := res.Error(); err != nil {
		b.Fatal(err)
	}
	e.srv.ResetCalls()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.m.GetPodStatus(e.ctx, pod.UID, pod.Name, pod.Namespace); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(e.srv.TotalCalls())/float64(b.N), "calls/op")
}

// BenchmarkRealPodStart starts one-container pods on containerd, each
// iteration twice: once with SyncPod and once with the same four CRI calls
// made directly (ImageStatus, RunPodSandbox, CreateContainer, StartContainer,
// minimal configs). Interleaving keeps the load of a shared machine fair to
// both; sync-ms/op, raw-ms/op and added-% compare them. ns/op covers both.
func BenchmarkRealPodStart(b *testing.B) {
	endpoint, image := testenv.CRIEndpoint(b), testenv.TestImage(b)
	ctx := context.Background()
	timer := &callTimer{per: map[string]time.Duration{}}
	m, err := cri.New(ctx, cri.Config{Endpoint: endpoint, PodLogsRoot: b.TempDir(), PodsRoot: b.TempDir(), DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(timer.intercept)}})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(timer.intercept))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	rt, img := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	logDir := b.TempDir()
	var syncTotal, rawTotal time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pod := benchPod(2*i, image)
		st := &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
		timer.on = true
		t0 := time.Now()
		res := m.SyncPod(ctx, pod, st, nil, nil)
		syncTotal += time.Since(t0)
		timer.on = false
		b.StopTimer()
		if err := res.Error(); err != nil {
			b.Fatal(err)
		}
		realCleanup(b, m, pod)
		b.StartTimer()

		pod = benchPod(2*i+1, image)
		t0 = time.Now()
		rawStart(b, ctx, rt, img, pod, image, logDir)
		rawTotal += time.Since(t0)
		b.StopTimer()
		realCleanup(b, m, pod)
		b.StartTimer()
	}
	b.ReportMetric(float64(syncTotal.Milliseconds())/float64(b.N), "sync-ms/op")
	b.ReportMetric(float64(rawTotal.Milliseconds())/float64(b.N), "raw-ms/op")
	b.ReportMetric(100*(float64(syncTotal)/float64(rawTotal)-1), "added-%")
	// Time SyncPod spends outside CRI calls: the manager's own work.
	b.ReportMetric(100*(float64(syncTotal)/float64(timer.total)-1), "own-%")
	for k, v := range timer.per {
		b.Logf("%s: %.1f ms/op inside SyncPod", k, float64(v.Microseconds())/1000/float64(b.N))
	}
}

// callTimer sums the time of CRI calls while on.
type callTimer struct {
	on    bool
	total time.Duration
	per   map[string]time.Duration
}

func (c *callTimer) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	t0 := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	if c.on {
		d := time.Since(t0)
		c.total += d
		c.per[method] += d
	}
	return err
}

func rawStart(b *testing.B, ctx context.Context, rt runtimeapi.RuntimeServiceClient, img runtimeapi.ImageServiceClient, pod *v1.Pod, image, logDir string) {
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
		Hostname:     pod.Name,
		LogDirectory: logDir,
		Labels:       map[string]string{cri.LabelPodUID: string(pod.UID)},
	}
	is, err := img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		b.Fatal(err)
	}
	c, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
		Image:    &runtimeapi.ImageSpec{Image: is.Image.Id},
		Command:  []string{"sleep", "3600"},
		LogPath:  pod.Name + "-main.log",
		Labels:   map[string]string{cri.LabelPodUID: string(pod.UID)},
	}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		b.Fatal(err)
	}
}

func realCleanup(b *testing.B, m *cri.Manager, pod *v1.Pod) {
	ctx := context.Background()
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		b.Fatal(err)
	}
	zero := int64(0)
	if err := m.KillPod(ctx, pod, podOf(st), &zero); err != nil {
		b.Fatal(err)
	}
	if err := m.RemovePod(ctx, pod.UID); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGetPodsSteady lists 1,000 running one-container pods again and
// again, as the relist does every second on a node at rest; fakecri's own
// allocations (in this process) are counted too.
func BenchmarkGetPodsSteady(b *testing.B) {
	e := newFakeEnv(b)
	const n = 1000
	for i := 0; i < n; i++ {
		pod := benchPod(i, "busybox:1")
		if err := e.m.SyncPod(e.ctx, pod, &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}, nil, nil).Error(); err != nil {
			b.Fatal(err)
		}
	}
	if pods, err := e.m.GetPods(e.ctx, true); err != nil || len(pods) != n {
		b.Fatalf("listed %d pods, err %v", len(pods), err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.m.GetPods(e.ctx, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecSession is one exec as the kubelet API serves it for a CRI
// runtime: the Manager's GetExecURL (the CRI's Exec) and a SPDY session at
// that URL on fakecri's streaming server, output and exit code read back.
func BenchmarkExecSession(b *testing.B) {
	e := newFakeEnv(b)
	pod := newPod("bench-exec", "busybox:1")
	st := &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	if err := e.m.SyncPod(e.ctx, pod, st, nil, nil).Error(); err != nil {
		b.Fatal(err)
	}
	id := e.status(b, pod).FindContainerStatusByName("main").ID
	e.srv.SetExecResult("main", []string{"date"}, fakecri.ExecResult{Stdout: "now\n"})
	var d streamingtest.Dialer
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		u, err := e.m.GetExecURL(e.ctx, pod, runtime.ExecRequest{ContainerID: id, Cmd: []string{"date"}, Stdout: true})
		if err != nil {
			b.Fatal(err)
		}
		var out bytes.Buffer
		if err := d.Exec(e.ctx, u, streamingtest.Streams{Stdout: &out}); err != nil || out.String() != "now\n" {
			b.Fatalf("exec: %v, output %q", err, out.String())
		}
	}
}
