package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vknode "github.com/virtual-kubelet/virtual-kubelet/node"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/e2e/cluster"
	mock "github.com/nodekit/nodekit/e2e/vkmock"
	"github.com/nodekit/nodekit/provider/nodeutil"
	"github.com/nodekit/nodekit/status"
)

// Both sides get the same client limits, high enough that client-go's
// token bucket bounds neither (its default, QPS 5, would bound both).
const perfQPS, perfBurst = 2000, 4000

// vkWorkers is the virtual-kubelet PodController's worker count, and
// nodekit's StatusSyncWorkers is its default, 8.
const vkWorkers = 8

// podCalls counts one runner's requests on pods: status writes (PUT or
// PATCH of pods/status) and reads of one pod; with byKind, all its
// requests by method and path (pods and events by kind).
type podCalls struct {
	writes, reads atomic.Int64
	byKind        bool
	stages        *stages // nil: none recorded
	mu            sync.Mutex
	kinds         map[string]int
}

func (c *podCalls) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		p := req.URL.Path
		if c.byKind {
			c.count(req)
		}
		if i := strings.Index(p, "/pods/"); i >= 0 {
			rest := p[i+len("/pods/"):]
			switch {
			case strings.HasSuffix(rest, "/status") && (req.Method == http.MethodPut || req.Method == http.MethodPatch):
				c.writes.Add(1)
				if c.stages == nil {
					break
				}
				name := strings.TrimSuffix(rest, "/status")
				c.stages.set(name, 1, time.Now())
				resp, err := rt.RoundTrip(req)
				c.stages.set(name, 2, time.Now())
				return resp, err
			case req.Method == http.MethodGet && !strings.Contains(rest, "/") && req.URL.Query().Get("watch") == "":
				c.reads.Add(1)
			}
		}
		return rt.RoundTrip(req)
	})
}

func (c *podCalls) count(req *http.Request) {
	p := req.URL.Path
	k := req.Method + " " + p
	if i := strings.Index(p, "/pods/"); i >= 0 {
		_, sub, _ := strings.Cut(p[i+len("/pods/"):], "/")
		k = req.Method + " pods/" + sub
	} else if strings.Contains(p, "/events") {
		k = req.Method + " events"
	}
	if req.URL.Query().Get("watch") != "" {
		k += " (watch)"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kinds == nil {
		c.kinds = map[string]int{}
	}
	c.kinds[k]++
}

func (c *podCalls) reset() {
	c.writes.Store(0)
	c.reads.Store(0)
	c.mu.Lock()
	c.kinds = nil
	c.mu.Unlock()
}

// stages records, per pod name, when one runner reached each stage of the
// pod's way to Running: the provider's CreatePod called, its status write
// sent, its answer received (the first of each).
type stages struct {
	mu sync.Mutex
	m  map[string][3]time.Time
}

func (s *stages) set(name string, i int, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][3]time.Time{}
	}
	v := s.m[name]
	if v[i].IsZero() {
		v[i] = t
	}
	s.m[name] = v
}

// report logs the stages' p50/p90/p99 over the pods created at created
// and seen Running after running: creation → CreatePod → write sent →
// answered → seen Running through the watch.
func (s *stages) report(t *testing.T, runner string, n int, created map[string]time.Time, running map[string]time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var a, b, c, d []time.Duration
	for name, st := range s.m {
		cr, ok := created[name]
		run, seen := running[name]
		if !ok || !seen || st[0].IsZero() || st[1].IsZero() || st[2].IsZero() {
			continue
		}
		a = append(a, st[0].Sub(cr))
		b = append(b, st[1].Sub(st[0]))
		c = append(c, st[2].Sub(st[1]))
		d = append(d, cr.Add(run).Sub(st[2]))
	}
	q := func(x []time.Duration) string {
		if len(x) == 0 {
			return "-"
		}
		slices.Sort(x)
		return fmt.Sprintf("%v/%v/%v", x[len(x)/2].Round(time.Millisecond), x[len(x)*9/10].Round(time.Millisecond), x[len(x)*99/100].Round(time.Millisecond))
	}
	t.Logf("stages, %s, %d pods (p50/p90/p99 of %d): creation→CreatePod %s | CreatePod→status write %s | write %s | answer→seen Running %s",
		runner, n, len(a), q(a), q(b), q(c), q(d))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// perfResult is one runner's run of n pods.
type perfResult struct {
	runner        string
	n, round      int
	all, p50, p99 time.Duration
	writes, reads int64
	allocBytes    uint64
	sample        *corev1.Pod
}

// lockedMock serializes the calls to virtual-kubelet's mock, whose pod map
// has no lock of its own: virtual-kubelet's workers (and nodekit's pod
// workers) call it at once, and at 1,000 pods that is "concurrent map
// read and map write". Both runners get it.
type lockedMock struct {
	mu     sync.Mutex
	p      *mock.MockProvider
	stages *stages // nil: none recorded
}

func (l *lockedMock) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	if l.stages != nil {
		l.stages.set(pod.Name, 0, time.Now())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.CreatePod(ctx, pod)
}

func (l *lockedMock) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.UpdatePod(ctx, pod)
}

func (l *lockedMock) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.DeletePod(ctx, pod)
}

func (l *lockedMock) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.GetPod(ctx, namespace, name)
}

func (l *lockedMock) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.GetPodStatus(ctx, namespace, name)
}

func (l *lockedMock) GetPods(ctx context.Context) ([]*corev1.Pod, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.GetPods(ctx)
}

func (l *lockedMock) NotifyPods(ctx context.Context, cb func(*corev1.Pod)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.NotifyPods(ctx, cb)
}

// mockProvider is virtual-kubelet's mock with room for n pods, and the
// node template its ConfigureNode fills.
func mockProvider(t *testing.T, nodeName string, n int) (*lockedMock, *corev1.Node) {
	t.Helper()
	p, err := mock.NewMockProviderMockConfig(mock.MockConfig{CPU: "1000", Memory: "4Ti", Pods: strconv.Itoa(n + 10)},
		nodeName, "linux", "127.0.0.1", 10250)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := nodeutil.DefaultTemplate(nodeName)
	p.ConfigureNode(context.Background(), tmpl)
	return &lockedMock{p: p}, tmpl
}

// startVirtualKubeletTuned runs virtual-kubelet's NodeController and
// PodController for the mock, its queues' rate limits raised (their
// default, 10 qps, takes 90 s for 1,000 pods), until the returned stop.
func startVirtualKubeletTuned(t *testing.T, cs *kubernetes.Clientset, nodeName string, p *lockedMock, tmpl *corev1.Node) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pods := informers.NewSharedInformerFactoryWithOptions(cs, time.Minute, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	}))
	others := informers.NewSharedInformerFactory(cs, time.Minute)
	eb := record.NewBroadcaster()
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	limiter := func() workqueue.TypedRateLimiter[any] {
		return workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[any](5*time.Millisecond, 1000*time.Second),
			&workqueue.TypedBucketRateLimiter[any]{Limiter: rate.NewLimiter(rate.Limit(100000), 100000)})
	}
	pc, err := vknode.NewPodController(vknode.PodControllerConfig{
		PodClient:                            cs.CoreV1(),
		PodInformer:                          pods.Core().V1().Pods(),
		EventRecorder:                        eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "virtual-kubelet", Host: nodeName}),
		Provider:                             p,
		ConfigMapInformer:                    others.Core().V1().ConfigMaps(),
		SecretInformer:                       others.Core().V1().Secrets(),
		ServiceInformer:                      others.Core().V1().Services(),
		SyncPodsFromKubernetesRateLimiter:    limiter(),
		SyncPodStatusFromProviderRateLimiter: limiter(),
		DeletePodsFromKubernetesRateLimiter:  limiter(),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	nc, err := vknode.NewNodeController(vknode.NaiveNodeProvider{}, tmpl, cs.CoreV1().Nodes(),
		vknode.WithNodeEnableLeaseV1(cs.CoordinationV1().Leases(corev1.NamespaceNodeLease), 40))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pods.Start(ctx.Done())
	others.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := pc.Run(ctx, vkWorkers); err != nil {
			t.Errorf("virtual-kubelet PodController: %v", err)
		}
	})
	wg.Go(func() {
		if err := nc.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("virtual-kubelet NodeController: %v", err)
		}
	})
	select {
	case <-pc.Ready():
	case <-time.After(time.Minute):
		t.Fatal("virtual-kubelet PodController not ready after a minute")
	}
	return func() {
		cancel()
		wg.Wait()
		pods.Shutdown()
		others.Shutdown()
		eb.Shutdown()
	}
}

// startNodekitMock runs the mock on nodekit's one-call setup until the
// returned stop.
func startNodekitMock(t *testing.T, cs *kubernetes.Clientset, nodeName string, p *lockedMock, tmpl *corev1.Node) func() {
	t.Helper()
	eb := record.NewBroadcaster()
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	n, err := nodeutil.NewNode(nodeName, p, nodeutil.WithTemplate(tmpl),
		nodeutil.WithRecorder(eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "nodekit", Host: nodeName})),
		nodeutil.WithClients(nodeutil.Clients{
			Pods:      cs.CoreV1().Pods(""),
			PodStatus: func(ns string) status.PodClient { return cs.CoreV1().Pods(ns) },
			Nodes:     cs.CoreV1().Nodes(),
			Leases:    cs.CoordinationV1().Leases(corev1.NamespaceNodeLease),
		}))
	if err != nil {
		eb.Shutdown()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	select {
	case <-n.Agent().Node().Registered():
	case <-time.After(time.Minute):
		t.Fatal("nodekit's Node not registered after a minute")
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("nodeutil.Node.Run: %v", err)
		}
		eb.Shutdown()
	}
}

// measure creates n pods bound to nodeName at once and waits until all are
// Running as the apiserver shows them, timing each from its Create call.
func measure(t *testing.T, admin *kubernetes.Clientset, runner, nodeName string, n int, calls *podCalls) perfResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	pods := admin.CoreV1().Pods("default")
	var mu sync.Mutex
	created := make(map[string]time.Time, n)
	running := make(map[string]time.Duration, n)
	var sample *corev1.Pod
	allRunning := make(chan struct{})
	seen := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Status.Phase != corev1.PodRunning {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if _, seen := running[p.Name]; seen {
			return
		}
		c, ok := created[p.Name]
		if !ok {
			c = now // seen before the Create call returned
		}
		running[p.Name] = now.Sub(c)
		if sample == nil {
			sample = p.DeepCopy()
		}
		if len(running) == n {
			close(allRunning)
		}
	}
	// An informer, which resumes a watch the apiserver ends.
	factory := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	}))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() {
		close(stop)
		factory.Shutdown()
	}()
	factory.WaitForCacheSync(stop)

	goruntime.GC()
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	calls.reset()
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range next {
				p := testPod(fmt.Sprintf("perf-%s-%d", nodeName, i), nodeName)
				p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
				mu.Lock()
				created[p.Name] = time.Now()
				mu.Unlock()
				if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Errorf("creating %s: %v", p.Name, err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case <-allRunning:
	case <-time.After(time.Minute + time.Duration(n)*50*time.Millisecond):
		mu.Lock()
		got := len(running)
		mu.Unlock()
		l, err := pods.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String(), Limit: 1})
		if err == nil && len(l.Items) > 0 {
			t.Logf("a pod: %s", comparable(&l.Items[0]))
		}
		t.Fatalf("%s: %d of %d pods Running in time", runner, got, n)
	}
	all := time.Since(start)
	goruntime.ReadMemStats(&after)
	mu.Lock()
	defer mu.Unlock()
	lat := make([]time.Duration, 0, n)
	for _, d := range running {
		lat = append(lat, d)
	}
	slices.Sort(lat)
	if calls.stages != nil {
		calls.stages.report(t, runner, n, created, running)
	}
	return perfResult{runner: runner, n: n, all: all, p50: lat[len(lat)/2], p99: lat[len(lat)*99/100],
		writes: calls.writes.Load(), reads: calls.reads.Load(), allocBytes: after.TotalAlloc - before.TotalAlloc, sample: sample}
}

// profile writes CPU profiles of one measured run to dir (none if dir is
// empty): this process's over the run (both runners are in it) as
// <name>.pprof, and the apiserver's over its first seconds as
// apiserver-<name>.pprof. The returned stop ends them.
func profile(t *testing.T, admin *kubernetes.Clientset, dir, name string, seconds int) (stop func()) {
	t.Helper()
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		t.Fatal(err)
	}
	api := make(chan struct{})
	go func() {
		defer close(api)
		b, err := admin.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(seconds)).DoRaw(context.Background())
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "apiserver-"+name+".pprof"), b, 0o644)
		}
		if err != nil {
			t.Errorf("the apiserver's profile: %v", err)
		}
	}()
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			t.Error(err)
		}
		<-api
	}
}

// removePods deletes the pods bound to nodeName at once and waits until
// the apiserver has none left.
func removePods(t *testing.T, admin *kubernetes.Clientset, nodeName string) {
	t.Helper()
	sel := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String()}
	pods := admin.CoreV1().Pods("default")
	if err := pods.DeleteCollection(t.Context(), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, sel); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l, err := pods.List(t.Context(), sel)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pods of %s left after two minutes", len(l.Items), nodeName)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMockProviderSideBySide runs virtual-kubelet's own mock provider
// (package vkmock, copied unchanged; its calls serialized by lockedMock,
// as it has no lock of its own) under virtual-kubelet's controllers
// (queue limits raised) and under nodekit's nodeutil, one after the other
// on the same kube-apiserver in two rounds of opposite order, with 100 and
// 1,000 pods created at once (32 creating clients),
// and reports per runner: time until all are Running, p50 and p99 of a
// pod's time from Create to Running, pod status writes and single-pod
// reads by the runner, and bytes allocated in this process meanwhile. The
// statuses must agree; the figures are logged (docs/performance.md).
// 1,000 pods only with NODEKIT_PERF=1. NODEKIT_PERF_PROFILE=<dir> writes
// CPU profiles of each measured run there (profile) and logs each runner's
// requests by kind:
//
//	cd e2e && NODEKIT_PERF=1 go test -count=1 -run TestMockProviderSideBySide -v .
func TestMockProviderSideBySide(t *testing.T) {
	profDir := os.Getenv("NODEKIT_PERF_PROFILE")
	var cfg cluster.Config
	if profDir != "" {
		cfg.APIServerArgs = []string{"--profiling=true"}
	}
	c := startClusterWith(t, cfg)
	admin, _ := clientset(t, c.RESTConfig(), perfQPS, perfBurst)
	// 1,000 pods take minutes with -race (as CI runs e2e); the figures of
	// docs/performance.md are taken without it, with NODEKIT_PERF=1.
	sizes := []int{100}
	if os.Getenv("NODEKIT_PERF") == "1" {
		sizes = append(sizes, 1000)
	}
	var results []perfResult
	// Two rounds in opposite orders: the runner that goes second meets an
	// apiserver still busy with the first one's leftovers (events, the
	// deleted pods' watch events), which cost it up to twice the time at
	// 100 pods.
	orders := [][]string{{"virtual-kubelet", "nodekit"}, {"nodekit", "virtual-kubelet"}}
	for _, n := range sizes {
		for round, order := range orders {
			for _, runner := range order {
				nodeName := fmt.Sprintf("%s-%d-%d", map[string]string{"virtual-kubelet": "vk", "nodekit": "nk"}[runner], n, round)
				calls := &podCalls{byKind: profDir != ""}
				cs, _ := clientset(t, c.RESTConfig(), perfQPS, perfBurst, calls.wrap)
				p, tmpl := mockProvider(t, nodeName, n)
				if os.Getenv("NODEKIT_PERF") == "1" {
					calls.stages = &stages{}
					p.stages = calls.stages
				}
				var stop func()
				if runner == "virtual-kubelet" {
					stop = startVirtualKubeletTuned(t, cs, nodeName, p, tmpl)
				} else {
					stop = startNodekitMock(t, cs, nodeName, p, tmpl)
				}
				name := fmt.Sprintf("%s-%d-%d", runner, n, round+1)
				stopProfile := profile(t, admin, profDir, name, max(1, n*4/1000))
				res := measure(t, admin, runner, nodeName, n, calls)
				stopProfile()
				if profDir != "" {
					calls.mu.Lock()
					t.Logf("%s: requests %v", name, calls.kinds)
					calls.mu.Unlock()
				}
				res.round = round + 1
				stop()
				results = append(results, res)
				t.Logf("%s, %d pods, round %d: all Running %v, p50 %v, p99 %v, status writes %d, pod reads %d, allocated %.1f MiB",
					runner, n, round+1, res.all.Round(time.Millisecond), res.p50.Round(time.Millisecond), res.p99.Round(time.Millisecond),
					res.writes, res.reads, float64(res.allocBytes)/(1<<20))
				removePods(t, admin, nodeName)
			}
		}
	}
	var b strings.Builder
	b.WriteString("\n| pods | runner | all Running | p50 | p99 | status writes | pod reads | allocated |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %d | %s (round %d) | %v | %v | %v | %d | %d | %.1f MiB |\n", r.n, r.runner, r.round, r.all.Round(time.Millisecond),
			r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.writes, r.reads, float64(r.allocBytes)/(1<<20))
	}
	t.Log(b.String())
	for i := 0; i+1 < len(results); i += 2 {
		vk, nk := results[i], results[i+1]
		if vk.runner != "virtual-kubelet" {
			vk, nk = nk, vk
		}
		if a, b := comparable(vk.sample), comparable(nk.sample); a != b {
			t.Errorf("%d pods: the mock's Running pod differs:\n  virtual-kubelet %s\n  nodekit         %s", vk.n, a, b)
		}
		for _, d := range statusDiff(vk.sample, nk.sample) {
			t.Logf("difference (%d pods): %s", vk.n, d)
		}
		if nk.writes > int64(nk.n) {
			t.Errorf("%d pods: nodekit wrote %d statuses, want at most one per pod", nk.n, nk.writes)
		}
	}
}
