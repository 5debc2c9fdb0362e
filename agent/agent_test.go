package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeCRIChildEnv) != "" {
		os.Exit(serveFakeCRI())
	}
	goleak.VerifyTestMain(m)
}

const src = podutil.ApiserverSource

// fastConfig is a Config on rt with short periods, fed by the "api" source.
func fastConfig(rt runtime.Runtime) Config {
	return Config{
		NodeName:                "n1",
		Runtime:                 rt,
		Sources:                 []string{src},
		RelistPeriod:            10 * time.Millisecond,
		RuntimeCheckPeriod:      20 * time.Millisecond,
		SyncFrequency:           200 * time.Millisecond,
		SyncErrorBackOff:        50 * time.Millisecond,
		CrashLoopBackOffInitial: 20 * time.Millisecond,
		CrashLoopBackOffMax:     80 * time.Millisecond,
	}
}

type running struct {
	a      *Agent
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func start(t testing.TB, c Config) *running {
	t.Helper()
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{a: a, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// stop ends Run and waits for it.
func (r *running) stop() {
	r.once.Do(func() {
		r.cancel()
		if err := <-r.done; err != nil {
			panic(err)
		}
	})
}

func (r *running) set(pods ...*v1.Pod) {
	r.a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: pods}
}

// waitFor polls cond until it holds; the deadline only keeps a broken test
// from hanging.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *running) pod(uid types.UID) *v1.Pod {
	for _, p := range r.a.Pods() {
		if p.UID == uid {
			return p
		}
	}
	return nil
}

func (r *running) phase(uid types.UID) v1.PodPhase {
	if p := r.pod(uid); p != nil {
		return p.Status.Phase
	}
	return ""
}

func newPod(name string, policy v1.RestartPolicy, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.Now()},
		Spec: v1.PodSpec{RestartPolicy: policy, NodeName: "n1", TerminationGracePeriodSeconds: ptr.To[int64](1)},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "img-" + c})
	}
	return p
}

func runningContainers(t *testing.T, rt runtime.Runtime, uid types.UID) int {
	t.Helper()
	// Retried: the fault-injection tests make the runtime fail at random.
	for range 50 {
		st, err := rt.GetPodStatus(context.Background(), uid, "", "")
		if err == nil {
			return len(st.RunningContainerStatuses())
		}
	}
	t.Fatalf("GetPodStatus of %s keeps failing", uid)
	return -1
}

// runningPods maps each pod GetPods lists as running (a running container
// or a ready sandbox) to its number of running containers.
func runningPods(t *testing.T, rt runtime.Runtime) map[types.UID]int {
	t.Helper()
	for range 50 {
		pods, err := rt.GetPods(context.Background(), false)
		if err != nil {
			continue
		}
		out := make(map[types.UID]int, len(pods))
		for _, p := range pods {
			out[p.ID] += 0
			for _, c := range p.Containers {
				if c.State == runtime.ContainerStateRunning {
					out[p.ID]++
				}
			}
		}
		return out
	}
	t.Fatal("GetPods keeps failing")
	return nil
}

func TestPodReachesRunningWithGeneratedStatus(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	r := start(t, fastConfig(rt))
	pod := newPod("web", v1.RestartPolicyAlways, "app", "sidecar")
	r.set(pod)

	waitFor(t, "pod running and ready", func() bool {
		p := r.pod(pod.UID)
		return p != nil && p.Status.Phase == v1.PodRunning && podReady(p)
	})
	p := r.pod(pod.UID)
	if len(p.Status.ContainerStatuses) != 2 {
		t.Fatalf("container statuses = %d, want 2", len(p.Status.ContainerStatuses))
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil || !cs.Ready || cs.ContainerID == "" || cs.Image == "" {
			t.Errorf("container %s: %+v, want running, ready, with ID and image", cs.Name, cs)
		}
	}
	if runningContainers(t, rt, pod.UID) != 2 {
		t.Fatalf("runtime runs %d containers, want 2", runningContainers(t, rt, pod.UID))
	}
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func TestCompletedPodsReachTerminalPhase(t *testing.T) {
	tests := []struct {
		name   string
		policy v1.RestartPolicy
		code   int
		want   v1.PodPhase
	}{
		{"exit 0 under Never succeeds", v1.RestartPolicyNever, 0, v1.PodSucceeded},
		{"exit 1 under Never fails", v1.RestartPolicyNever, 1, v1.PodFailed},
		{"exit 0 under OnFailure succeeds", v1.RestartPolicyOnFailure, 0, v1.PodSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, _ := fake.New(fake.Config{})
			rt.SetContainerBehavior("job", fake.Behavior{Exit: true, ExitAfter: 20 * time.Millisecond, ExitCode: tt.code})
			r := start(t, fastConfig(rt))
			pod := newPod("job", tt.policy, "job")
			r.set(pod)
			waitFor(t, string(tt.want), func() bool { return r.phase(pod.UID) == tt.want })
			cs := r.pod(pod.UID).Status.ContainerStatuses[0]
			if cs.State.Terminated == nil || int(cs.State.Terminated.ExitCode) != tt.code {
				t.Fatalf("container state %+v, want terminated with %d", cs.State, tt.code)
			}
		})
	}
}

func TestCrashingContainerRestartsWithBackOff(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	rt.SetContainerBehavior("crash", fake.Behavior{Exit: true, ExitAfter: 5 * time.Millisecond, ExitCode: 2})
	c := fastConfig(rt)
	// The sync that finds an exit held back by the back-off writes the
	// waiting state (status.GenerateOptions.BackOff), and the pod is due
	// again when the back-off ends (podworkers.RetryAfter), so the state
	// lasts the whole 3s back-off: the 10ms polls below cannot miss it.
	c.CrashLoopBackOffInitial, c.CrashLoopBackOffMax = 3*time.Second, 3*time.Second
	r := start(t, c)
	pod := newPod("crashy", v1.RestartPolicyAlways, "crash")
	r.set(pod)
	sawBackOff := false
	waitFor(t, "two restarts", func() bool {
		p := r.pod(pod.UID)
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" {
			sawBackOff = true
		}
		return cs.RestartCount >= 2
	})
	if r.phase(pod.UID) != v1.PodRunning {
		t.Errorf("phase = %s, want Running while restarting", r.phase(pod.UID))
	}
	if !sawBackOff {
		t.Errorf("never saw waiting reason CrashLoopBackOff")
	}
	if rt.CallCount("SyncPod") < 3 {
		t.Errorf("SyncPod called %d times, want at least 3", rt.CallCount("SyncPod"))
	}
}

func TestRemovedPodIsKilled(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	r := start(t, fastConfig(rt))
	keep, gone := newPod("keep", v1.RestartPolicyAlways, "c"), newPod("gone", v1.RestartPolicyAlways, "c")
	r.set(keep, gone)
	waitFor(t, "both running", func() bool {
		return runningContainers(t, rt, keep.UID) == 1 && runningContainers(t, rt, gone.UID) == 1
	})
	r.set(keep)
	waitFor(t, "removed pod stopped", func() bool { return runningContainers(t, rt, gone.UID) == 0 })
	if runningContainers(t, rt, keep.UID) != 1 {
		t.Fatal("the pod that stayed was disturbed")
	}
	if r.pod(gone.UID) != nil {
		t.Fatal("removed pod still listed by Pods")
	}
}

func TestGracefulDeletionUsesDeletionGracePeriod(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	r := start(t, fastConfig(rt))
	pod := newPod("del", v1.RestartPolicyAlways, "c")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	r.set(pod)
	waitFor(t, "running", func() bool { return runningContainers(t, rt, pod.UID) == 1 })

	deleting := pod.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, ptr.To[int64](7)
	r.set(deleting)
	waitFor(t, "stopped", func() bool { return runningContainers(t, rt, pod.UID) == 0 })
	var got []int64
	for _, k := range rt.Kills() {
		if k.PodUID == pod.UID {
			got = append(got, k.GracePeriod)
		}
	}
	if len(got) == 0 || got[0] != 7 {
		t.Fatalf("kill grace periods %v, want 7 first", got)
	}
}

func TestFailedKillIsAFailedKillPodEvent(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	rec := podconfigtest.NewRecorder(0)
	c := fastConfig(rt)
	c.Recorder = rec
	r := start(t, c)
	pod := newPod("stuck", v1.RestartPolicyAlways, "c")
	r.set(pod)
	waitFor(t, "running", func() bool { return runningContainers(t, rt, pod.UID) == 1 })
	if err := rt.SetFailureRate("StopContainer", 1); err != nil {
		t.Fatal(err)
	}
	deleting := pod.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, ptr.To[int64](1)
	r.set(deleting)
	waitFor(t, "a FailedKillPod event", func() bool {
		for _, e := range rec.Events() {
			if e.Reason == "FailedKillPod" && strings.HasPrefix(e.Message, "error killing pod: ") {
				return true
			}
		}
		return false
	})
	if err := rt.SetFailureRate("StopContainer", 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stopped once the runtime recovers", func() bool { return runningContainers(t, rt, pod.UID) == 0 })
}

func TestAdmission(t *testing.T) {
	privileged := newPod("priv", v1.RestartPolicyAlways, "c")
	privileged.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	hostNet := newPod("hostnet", v1.RestartPolicyAlways, "c")
	hostNet.Spec.HostNetwork = true
	hugeCPU := newPod("huge", v1.RestartPolicyAlways, "c")
	hugeCPU.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100000")}
	elsewhere := newPod("elsewhere", v1.RestartPolicyAlways, "c")
	elsewhere.Spec.NodeSelector = map[string]string{"zone": "nowhere"}
	sysctl := func(name, s string) *v1.Pod {
		p := newPod(name, v1.RestartPolicyAlways, "c")
		p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: s, Value: "1"}}}
		return p
	}
	withNode := func(c *Config) {
		api := nodetest.New()
		c.Node = &node.Config{Nodes: api.Nodes(), Leases: api.Leases()}
	}

	tests := []struct {
		name   string
		mutate func(*Config)
		pod    *v1.Pod
		reason string
	}{
		{"privileged pod admitted by default, as by the kubelet", nil, privileged, ""},
		{"privileged pod rejected when denied", func(c *Config) { c.DenyPrivileged = true }, privileged, ReasonPrivilegedNotAllowed},
		{"host network admitted by default, as by the kubelet", nil, hostNet, ""},
		{"host network rejected when denied", func(c *Config) { c.DenyHostNamespaces = true }, hostNet, ReasonHostNamespacesNotAllowed},
		{"a safe sysctl admitted", nil, sysctl("safe", "net.ipv4.ip_local_port_range"), ""},
		{"an unsafe sysctl rejected, as by the kubelet", nil, sysctl("unsafe", "kernel.msgmax"), admission.ReasonSysctlForbidden},
		{"an unsafe sysctl admitted once allowed", func(c *Config) { c.AllowedUnsafeSysctls = []string{"kernel.msg*"} }, sysctl("unsafe", "kernel.msgmax"), ""},
		{"pod beyond MaxPods rejected", func(c *Config) { c.MaxPods = 1 }, newPod("second", v1.RestartPolicyAlways, "c"), ReasonOutOfPods},
		{"custom handler after the built-ins rejects with its reason", func(c *Config) {
			c.AdmitHandlers = append(DefaultAdmitHandlers(*c), admission.PodAdmitHandlerFunc(func(a *admission.PodAdmitAttributes) admission.PodAdmitResult {
				if a.Pod.Name == "second" && len(a.OtherPods) == 1 && a.OtherPods[0].Name == "first" {
					return admission.PodAdmitResult{Reason: "NotOnThisNode", Message: "second pods go elsewhere"}
				}
				return admission.PodAdmitResult{Admit: true}
			}))
		}, newPod("second", v1.RestartPolicyAlways, "c"), "NotOnThisNode"},
		{"with a Node, a pod beyond its cpu rejected, as by the kubelet", withNode, hugeCPU, "OutOfcpu"},
		{"with a Node, a pod whose node selector it does not match rejected", withNode, elsewhere, "NodeAffinity"},
		{"without a Node, resources are not checked", nil, hugeCPU, ""},
		{"IgnoreCapacity admits beyond MaxPods (virtual-kubelet's way)", func(c *Config) { c.MaxPods, c.IgnoreCapacity = 1, true }, newPod("second", v1.RestartPolicyAlways, "c"), ""},
		{"IgnoreCapacity admits beyond the Node's cpu", func(c *Config) { withNode(c); c.IgnoreCapacity = true }, hugeCPU, ""},
		{"IgnoreCapacity still checks the node selector", func(c *Config) { withNode(c); c.IgnoreCapacity = true }, elsewhere, "NodeAffinity"},
		{"empty handler list admits beyond MaxPods", func(c *Config) {
			c.MaxPods, c.AdmitHandlers = 1, []admission.PodAdmitHandler{}
		}, newPod("second", v1.RestartPolicyAlways, "c"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, _ := fake.New(fake.Config{})
			c := fastConfig(rt)
			if tt.mutate != nil {
				tt.mutate(&c)
			}
			r := start(t, c)
			if n := r.a.Node(); n != nil {
				waitFor(t, "the Node registered", func() bool { return n.SharedNode() != nil })
			}
			first := newPod("first", v1.RestartPolicyAlways, "c")
			first.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
			r.set(first, tt.pod)
			waitFor(t, "first pod running", func() bool { return r.phase(first.UID) == v1.PodRunning })
			if tt.reason == "" {
				waitFor(t, "pod running", func() bool { return r.phase(tt.pod.UID) == v1.PodRunning })
				return
			}
			waitFor(t, "pod failed", func() bool { return r.phase(tt.pod.UID) == v1.PodFailed })
			if got := r.pod(tt.pod.UID).Status; got.Reason != tt.reason || !strings.HasPrefix(got.Message, "Pod was rejected: ") {
				t.Fatalf("reason, message = %q, %q; want %q, a rejection", got.Reason, got.Message, tt.reason)
			}
			if n := rt.CallCount("SyncPod"); n == 0 {
				t.Fatal("first pod never synced")
			}
			if st, _ := rt.GetPodStatus(context.Background(), tt.pod.UID, "", ""); len(st.ContainerStatuses) != 0 || len(st.SandboxStatuses) != 0 {
				t.Fatalf("rejected pod reached the runtime: %+v", st)
			}
		})
	}
}

// TestIgnoreCapacityStillRefusesATakenHostPort: with IgnoreCapacity the
// node's pods are listed only for a pod that asks for a host port; that
// pod still meets the pods admitted before it, in earlier batches and in
// its own.
func TestIgnoreCapacityStillRefusesATakenHostPort(t *testing.T) {
	port := func(p *v1.Pod) *v1.Pod {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}}
		return p
	}
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("one batch %v", batched), func(t *testing.T) {
			rt, _ := fake.New(fake.Config{})
			c := fastConfig(rt)
			api := nodetest.New()
			c.Node, c.IgnoreCapacity = &node.Config{Nodes: api.Nodes(), Leases: api.Leases()}, true
			r := start(t, c)
			if !r.a.usageOnly {
				t.Fatal("a virtual node's default admission (a Node, IgnoreCapacity, no eviction) lists its pods for every ADD, want only when a host port is checked")
			}
			waitFor(t, "the Node registered", func() bool { return r.a.Node().SharedNode() != nil })
			var pods []*v1.Pod
			for i, p := range []*v1.Pod{newPod("plain", v1.RestartPolicyAlways, "c"), port(newPod("binds", v1.RestartPolicyAlways, "c")),
				newPod("plain-2", v1.RestartPolicyAlways, "c"), port(newPod("late", v1.RestartPolicyAlways, "c"))} {
				p.CreationTimestamp = metav1.NewTime(time.Now().Add(time.Duration(i-10) * time.Minute))
				pods = append(pods, p)
			}
			if batched {
				r.a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: pods}
			} else {
				for _, p := range pods {
					r.a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{p}}
				}
			}
			for _, p := range pods[:3] {
				waitFor(t, p.Name+" running", func() bool { return r.phase(p.UID) == v1.PodRunning })
			}
			waitFor(t, "late failed", func() bool { return r.phase(pods[3].UID) == v1.PodFailed })
			if got := r.pod(pods[3].UID).Status.Reason; got != admission.ReasonNodePorts {
				t.Fatalf("reason %q, want %q", got, admission.ReasonNodePorts)
			}
		})
	}
}

func TestOrphanedRuntimePodIsKilled(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	orphan := newPod("orphan", v1.RestartPolicyAlways, "c")
	rt.AddRunningPod(orphan)
	r := start(t, fastConfig(rt))
	r.set() // the source is ready and wants nothing
	waitFor(t, "orphan stopped", func() bool { return runningContainers(t, rt, orphan.UID) == 0 })
}

func TestTerminateOnExitStopsEveryPod(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.TerminateOnExit = true
	r := start(t, c)
	pods := []*v1.Pod{newPod("a", v1.RestartPolicyAlways, "c"), newPod("b", v1.RestartPolicyAlways, "c1", "c2")}
	r.set(pods...)
	waitFor(t, "running", func() bool {
		return runningContainers(t, rt, pods[0].UID) == 1 && runningContainers(t, rt, pods[1].UID) == 2
	})
	r.stop()
	running, err := rt.GetPods(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(running) != 0 {
		t.Fatalf("%d pods still running after Run returned", len(running))
	}
	all, _ := rt.GetPods(context.Background(), true)
	if len(all) != 0 {
		t.Fatalf("%d pods left on the runtime after shutdown, want all removed", len(all))
	}
}

func TestStaticPodsFromManifestDirectory(t *testing.T) {
	dir := t.TempDir()
	manifest := `apiVersion: v1
kind: Pod
metadata:
  name: static-web
spec:
  containers:
  - name: web
    image: nginx
`
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.Sources, c.StaticPodPath = nil, dir
	r := start(t, c)
	var got *v1.Pod
	waitFor(t, "static pod running", func() bool {
		for _, p := range r.a.Pods() {
			if p.Status.Phase == v1.PodRunning {
				got = p
				return true
			}
		}
		return false
	})
	if got.Name != "static-web-n1" || !podutil.IsStaticPod(got) {
		t.Fatalf("pod %s (source %q), want static-web-n1 from file", got.Name, podutil.Source(got))
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	tests := []struct {
		name string
		c    Config
	}{
		{"no node name", Config{Runtime: rt}},
		{"no runtime", Config{NodeName: "n"}},
		{"negative sync frequency", Config{NodeName: "n", Runtime: rt, SyncFrequency: -1}},
		{"negative status sync workers", Config{NodeName: "n", Runtime: rt, StatusSyncWorkers: -1}},
		{"repeated source", Config{NodeName: "n", Runtime: rt, Sources: []string{"x", "x"}}},
		{"back-off max below initial", Config{NodeName: "n", Runtime: rt, CrashLoopBackOffInitial: time.Minute, CrashLoopBackOffMax: time.Second}},
		{"unsafe sysctl not namespaced", Config{NodeName: "n", Runtime: rt, AllowedUnsafeSysctls: []string{"vm.swappiness"}}},
		{"negative PLEG event capacity", Config{NodeName: "n", Runtime: rt, PLEGEventCapacity: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.c); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestRunTwiceFails(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	a, err := New(fastConfig(rt))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Run(ctx); err != nil {
		t.Fatalf("first Run = %v, want nil after its context ended", err)
	}
	if err := a.Run(ctx); err == nil {
		t.Fatal("second Run succeeded")
	}
}

// faultCounter counts the calls of the runtime under it that failed with an
// injected fault, so the fault test knows it faced some.
type faultCounter struct {
	*fake.Runtime
	mu     sync.Mutex
	faults int
}

func (f *faultCounter) count(err error) {
	if errors.Is(err, fake.ErrInjected) {
		f.mu.Lock()
		f.faults++
		f.mu.Unlock()
	}
}

func (f *faultCounter) injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.faults
}

func (f *faultCounter) SyncPod(ctx context.Context, pod *v1.Pod, st *runtime.PodStatus, s []v1.Secret, b *runtime.Backoff) runtime.PodSyncResult {
	res := f.Runtime.SyncPod(ctx, pod, st, s, b)
	f.count(res.Error())
	return res
}

func (f *faultCounter) KillPod(ctx context.Context, pod *v1.Pod, rp runtime.Pod, grace *int64) error {
	err := f.Runtime.KillPod(ctx, pod, rp, grace)
	f.count(err)
	return err
}

func (f *faultCounter) GetPodStatus(ctx context.Context, uid types.UID, name, ns string) (*runtime.PodStatus, error) {
	st, err := f.Runtime.GetPodStatus(ctx, uid, name, ns)
	f.count(err)
	return st, err
}

func (f *faultCounter) GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error) {
	pods, err := f.Runtime.GetPods(ctx, all)
	f.count(err)
	return pods, err
}

// The in-memory runtime fails 10 % of its calls and of the steps inside
// SyncPod and KillPod (seeded). Every pod must still reach Running in its
// API status, removed pods must stop, and after Run returns with
// TerminateOnExit, with the faults still on, nothing of any pod may be left
// on the runtime. TestMain's goleak checks that no goroutine outlives Run.
func TestPodsConvergeDespiteRuntimeFaults(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 100
	}
	rates := map[string]float64{}
	for _, m := range []string{"SyncPod", "KillPod", "GetPodStatus", "GetPods", "Status", "CreatePodSandbox", "StartContainer", "StopContainer"} {
		rates[m] = 0.1
	}
	frt, _ := fake.New(fake.Config{Seed: 42, FailureRates: rates})
	rt := &faultCounter{Runtime: frt}
	c := fastConfig(rt)
	c.MaxPods = n
	c.TerminateOnExit = true
	c.ShutdownTimeout = 20 * time.Second
	r := start(t, c)
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = newPod(fmt.Sprintf("p%04d", i), v1.RestartPolicyAlways, "c")
	}
	r.set(pods...)
	waitAPIRunning(t, r.a, pods)
	waitFor(t, "every pod running on the runtime", func() bool {
		running := runningPods(t, rt)
		for _, p := range pods {
			if running[p.UID] != 1 {
				return false
			}
		}
		return true
	})

	kept, removed := pods[:n/2], pods[n/2:]
	r.set(kept...)
	waitFor(t, "removed half stopped, sandboxes included", func() bool {
		listed := runningPods(t, rt) // pods with a running container or a ready sandbox
		for _, p := range removed {
			if _, ok := listed[p.UID]; ok {
				return false
			}
		}
		return true
	})
	running := runningPods(t, rt)
	for _, p := range kept {
		if running[p.UID] != 1 {
			t.Fatalf("kept pod %s runs %d containers, want 1", p.Name, running[p.UID])
		}
	}
	if got := len(r.a.Pods()); got != len(kept) {
		t.Fatalf("agent lists %d pods, want %d", got, len(kept))
	}
	if rt.injected() == 0 {
		t.Fatal("no fault was injected")
	}

	r.stop()
	for m := range rates {
		if err := frt.SetFailureRate(m, 0); err != nil {
			t.Fatal(err)
		}
	}
	if left := runningPods(t, rt); len(left) != 0 {
		t.Fatalf("%d pods (containers or sandboxes) left running after shutdown", len(left))
	}
	all, err := rt.GetPods(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 0 {
		t.Fatalf("%d pods left on the runtime after shutdown, want all removed", len(all))
	}
	t.Logf("%d injected faults", rt.injected())
}

// Pods must reach Running through the PLEG's events alone: neither the first
// runtime check (made before the first relist) nor a relist that finds
// every pod started at once (more events than the kubelet's 1,000) may leave
// them to the next resync or runtime check, an hour away here.
func TestManyPodsReachRunningWithoutResync(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 600
	}
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.MaxPods = n
	c.SyncFrequency, c.RuntimeCheckPeriod = time.Hour, time.Hour
	c.RelistPeriod = 500 * time.Millisecond // most pods start within one relist
	r := start(t, c)
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = newPod(fmt.Sprintf("p%04d", i), v1.RestartPolicyAlways, "c")
	}
	r.set(pods...)
	waitAPIRunning(t, r.a, pods)
}

// waitAPIRunning waits until the status the agent generated for each pod
// is Running with every container running.
func waitAPIRunning(t *testing.T, a *Agent, pods []*v1.Pod) {
	t.Helper()
	next := 0
	waitFor(t, "every pod Running in its API status", func() bool {
		for ; next < len(pods); next++ {
			st, ok := a.status.GetPodStatus(pods[next].UID)
			if !ok || st.Phase != v1.PodRunning || len(st.ContainerStatuses) != len(pods[next].Spec.Containers) {
				return false
			}
			for _, cs := range st.ContainerStatuses {
				if cs.State.Running == nil {
					return false
				}
			}
		}
		return true
	})
}

func TestPLEGEventCapacitySizesTheEventChannel(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	tests := []struct {
		name string
		c    Config
		want int
	}{
		{"default is the kubelet's 1000", Config{}, 1000},
		{"default gives 4 per pod above 250 pods", Config{MaxPods: 500}, 2000},
		{"set: a simulator's small nodes", Config{MaxPods: 500, PLEGEventCapacity: 16}, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.NodeName, tt.c.Runtime = "n", rt
			a, err := New(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			if got := cap(a.pleg.Watch()); got != tt.want {
				t.Errorf("PLEG channel capacity %d, want %d", got, tt.want)
			}
		})
	}
}

func TestSendMergesWithoutAForwarder(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	a, err := New(fastConfig(rt))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Send(context.Background(), "nope", podconfig.PodUpdate{Op: podconfig.SET}); err == nil {
		t.Fatal("Send to a source not in Config.Sources: no error")
	}
	pod := newPod("web", v1.RestartPolicyAlways, "app")
	sent := make(chan error, 1)
	go func() {
		sent <- a.Send(context.Background(), src, podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{pod}})
	}()
	select {
	case err := <-sent:
		t.Fatalf("Send returned %v before Run started", err)
	case <-time.After(50 * time.Millisecond):
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	if err := <-sent; err != nil {
		t.Fatalf("Send: %v", err)
	}
	r := &running{a: a}
	waitFor(t, "pod running", func() bool { return r.phase(pod.UID) == v1.PodRunning })
	a.srcMu.Lock()
	forwarded := a.extra[src].forwarded
	a.srcMu.Unlock()
	if forwarded {
		t.Error("a source fed by Send got a forwarder goroutine")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := a.Send(context.Background(), src, podconfig.PodUpdate{Op: podconfig.SET}); err == nil {
		t.Error("Send after Run ended: no error")
	}
}

func TestChannelAfterRunStartsItsForwarder(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	r := start(t, fastConfig(rt))
	waitFor(t, "Run started", func() bool { return r.a.life.Load() != nil })
	pod := newPod("web", v1.RestartPolicyAlways, "app")
	r.set(pod) // the first Channel call, Run running
	waitFor(t, "pod running", func() bool { return r.phase(pod.UID) == v1.PodRunning })
}
