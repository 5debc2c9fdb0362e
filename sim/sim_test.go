package sim_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newCluster(t *testing.T, c sim.Config, nodes ...string) *sim.Cluster {
	t.Helper()
	cl, err := sim.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	for _, n := range nodes {
		if _, err := cl.AddNode(n); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

func pod(name string, ann map[string]string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: ann},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "app:1"}}},
	}
}

func create(t *testing.T, cl *sim.Cluster, p *v1.Pod) *v1.Pod {
	t.Helper()
	out, err := cl.CreatePod(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func run(t *testing.T, cl *sim.Cluster, d time.Duration) {
	t.Helper()
	if err := cl.RunFor(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, cl *sim.Cluster, name string) *v1.Pod {
	t.Helper()
	p, err := cl.Pod("default", name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// scenario runs a mixed hour on three nodes and returns its event log.
func scenario(t *testing.T, seed uint64) []string {
	cl := newCluster(t, sim.Config{Seed: seed}, "n1", "n2", "n3")
	run(t, cl, time.Second)
	create(t, cl, pod("web", nil))
	create(t, cl, pod("crash", map[string]string{sim.ExitAnnotation: "3s:1"}))
	job := pod("job", map[string]string{sim.ExitAnnotation: "90s:0"})
	job.Spec.RestartPolicy = v1.RestartPolicyNever
	create(t, cl, job)
	create(t, cl, pod("nopull", map[string]string{sim.PullErrorAnnotation: "not found"}))
	slow := pod("slow", map[string]string{sim.StartDelayAnnotation: "20s", sim.ReadyAfterAnnotation: "30s"})
	slow.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"ready"}}}, PeriodSeconds: 5}
	create(t, cl, slow)
	sick := pod("sick", map[string]string{sim.ReadyAfterAnnotation: "1h"})
	sick.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"alive"}}}, PeriodSeconds: 10}
	create(t, cl, sick)
	run(t, cl, 5*time.Minute)
	if err := cl.DeletePod(context.Background(), "default", "web"); err != nil {
		t.Fatal(err)
	}
	cl.Node("n3").Stop()
	run(t, cl, 2*time.Minute)
	if err := cl.Node("n3").Start(); err != nil {
		t.Fatal(err)
	}
	run(t, cl, 53*time.Minute)
	var out []string
	for _, e := range cl.Events() {
		out = append(out, e.String())
	}
	return out
}

func TestSameSeedGivesTheSameEventLog(t *testing.T) {
	a := scenario(t, 42)
	b := scenario(t, 42)
	if !slices.Equal(a, b) {
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("logs differ at event %d of %d/%d:\n%s\n%s", i, len(a), len(b), a[i], b[i])
			}
		}
		t.Fatalf("logs differ in length: %d and %d", len(a), len(b))
	}
	if len(a) < 50 {
		t.Fatalf("only %d events: %q", len(a), a)
	}
	for _, want := range []string{"Pod default/job phase Succeeded", "Pod default/nopull app waiting ImagePullBackOff",
		"Pod default/web deleted", "Node n3 ready Unknown", "Pod default/crash app waiting CrashLoopBackOff",
		"Node n3 tainted node.kubernetes.io/unreachable:NoExecute",
		"event Normal TaintManagerEviction (taint-eviction-controller): Cancelling deletion of Pod",
		"Pod default/sick event Warning Unhealthy", "Pod default/sick event Normal Killing"} {
		if !slices.ContainsFunc(a, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("no %q in the log", want)
		}
	}
}

// The kubelet's crash-loop back-off on virtual time: the first restart is
// immediate, then 10s, 20s, 40s ... capped at 5m, each seen one relist
// (1s) after the exit.
func TestCrashLoopBackOffIntervalsAreExact(t *testing.T) {
	cl := newCluster(t, sim.Config{}, "n1")
	run(t, cl, time.Second)
	create(t, cl, pod("crash", map[string]string{sim.ExitAnnotation: "0s:1"}))
	// Every instance's start, from whichever field shows it: an instance
	// that exits at once is seen as the state or the last state, and a
	// status write may skip one of the two (the exit a back-off holds
	// back is shown waiting at once, with the exit as the last state).
	var starts []time.Time
	seen := func(s v1.ContainerState) {
		var at time.Time
		switch {
		case s.Running != nil:
			at = s.Running.StartedAt.Time
		case s.Terminated != nil:
			at = s.Terminated.StartedAt.Time
		default:
			return
		}
		if !slices.ContainsFunc(starts, at.Equal) {
			starts = append(starts, at)
		}
	}
	var backoffs []string
	var waitedSince []time.Time // when each CrashLoopBackOff wait was first seen
	err := cl.RunUntil(context.Background(), 30*time.Minute, func() bool {
		p := get(t, cl, "crash")
		if len(p.Status.ContainerStatuses) == 1 {
			cs := p.Status.ContainerStatuses[0]
			seen(cs.LastTerminationState)
			seen(cs.State)
			if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
				b, _, _ := strings.Cut(strings.TrimPrefix(w.Message, "back-off "), " ")
				if len(backoffs) == 0 || backoffs[len(backoffs)-1] != b {
					backoffs = append(backoffs, b)
					waitedSince = append(waitedSince, cl.Clock().Now())
				}
			}
		}
		return len(starts) == 10
	})
	if err != nil {
		t.Fatal(err, starts)
	}
	slices.SortFunc(starts, time.Time.Compare)
	var gaps []time.Duration
	for i := 1; i < len(starts); i++ {
		gaps = append(gaps, starts[i].Sub(starts[i-1]))
	}
	s := time.Second
	// The first exit restarts at the sync that sees it, the next relist
	// (1s), or in its instant, as the two timers' goroutines happen to run.
	// Every later restart is due exactly when its back-off ends
	// (podworkers.RetryAfter), whichever relist saw the exit.
	if len(gaps) != 9 || gaps[0] > s {
		t.Fatalf("gaps between starts %v, want 9, the first within one relist", gaps)
	}
	wantBackoff := []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 300 * s, 300 * s, 300 * s}
	if !slices.Equal(gaps[1:], wantBackoff) {
		t.Errorf("gaps between restarts %v, want exactly the back-offs %v", gaps[1:], wantBackoff)
	}
	wantBackoffs := []string{"10s", "20s", "40s", "1m20s", "2m40s", "5m0s"}
	if !slices.Equal(backoffs, wantBackoffs) {
		t.Errorf("back-offs %v, want %v", backoffs, wantBackoffs)
	}
	// The wait is in the status while the container waits: from the exit
	// the back-off holds back (seen by that relist or the next), so the
	// restart that ends it comes its back-off later.
	for i, at := range waitedSince {
		d, err := time.ParseDuration(backoffs[i])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(starts, func(st time.Time) bool { return st.Sub(at) >= d-s && st.Sub(at) <= d }) {
			t.Errorf("CrashLoopBackOff %s first seen at %v, not while its container waited (starts %v)", backoffs[i], at, starts)
		}
	}
}

// A crash-looping pod is synced when its back-off ends, not every second
// while it waits: each sync that finds it waiting records a BackOff event
// (an apiserver write), so over 3 minutes of a container that crashes
// after 10s there is one per back-off (and one per resync interval of a
// longer wait, as the kubelet caps it), where the 1s retry recorded 66.
func TestCrashLoopingPodRecordsOneBackOffPerWait(t *testing.T) {
	cl := newCluster(t, sim.Config{}, "n1")
	start := cl.Clock().Now()
	create(t, cl, pod("crash", map[string]string{sim.ExitAnnotation: "10s:1"}))
	run(t, cl, 3*time.Minute)
	var backoffs []time.Duration
	writes := 0 // the pod's status changes and recorded events
	for _, e := range cl.Events() {
		if e.Object != "default/crash" {
			continue
		}
		writes++
		if e.Reason == "BackOff" {
			backoffs = append(backoffs, e.Time.Sub(start))
		}
	}
	t.Logf("3 virtual minutes of a pod crashing after 10s: %d SyncPod calls, %d BackOff events, %d status changes and events",
		cl.Node("n1").Runtime().CallCount("SyncPod"), len(backoffs), writes)
	s := time.Second
	// Exits at 10s (restarted at once), 20s (10s back-off: restart at
	// 30s), 40s (20s: 60s), 70s (40s: 110s) and 120s (80s: the wait's
	// sync is capped at the 1m resync interval, 180s).
	want := []time.Duration{20 * s, 40 * s, 70 * s, 120 * s, 180 * s}
	if len(backoffs) != len(want) {
		t.Fatalf("BackOff events at %v, want one at each of %v", backoffs, want)
	}
	for i := range want {
		// the relist sees an exit in its instant or 1s later
		if backoffs[i] < want[i] || backoffs[i] > want[i]+s {
			t.Errorf("BackOff events at %v, want at %v (each up to a relist later)", backoffs, want)
		}
	}
}

// An image that cannot be pulled is tried again when its pull back-off
// ends (10s, 20s, 40s ... as the kubelet's), not polled every second with a
// BackOff event each time.
func TestImagePullIsRetriedWhenItsBackOffEnds(t *testing.T) {
	cl := newCluster(t, sim.Config{}, "n1")
	start := cl.Clock().Now()
	create(t, cl, pod("nopull", map[string]string{sim.PullErrorAnnotation: "not found"}))
	run(t, cl, 3*time.Minute)
	var pulls []time.Duration
	backoffs := 0
	for _, e := range cl.Events() {
		if e.Object != "default/nopull" {
			continue
		}
		switch e.Reason {
		case "Pulling":
			pulls = append(pulls, e.Time.Sub(start))
		case "BackOff":
			backoffs++
		}
	}
	t.Logf("3 virtual minutes of an image that cannot be pulled: %d SyncPod calls, pulls at %v, %d BackOff events",
		cl.Node("n1").Runtime().CallCount("SyncPod"), pulls, backoffs)
	// Failures at 0s, 10s, 30s, 70s and 150s: each back-off twice the last.
	s := time.Second
	want := []time.Duration{0, 10 * s, 30 * s, 70 * s, 150 * s}
	if len(pulls) != len(want) {
		t.Fatalf("pulls at %v, want at %v", pulls, want)
	}
	for i := range want {
		if d := pulls[i] - pulls[0]; d != want[i] {
			t.Errorf("pulls at %v, want at %v after the first", pulls, want)
			break
		}
	}
	// Syncs between two pulls find the back-off and record a BackOff
	// event each: the failed pull's retry (SyncErrorBackOff) and, in a
	// wait longer than a minute, the resync. Polled, it was 85.
	if backoffs > 2*len(pulls) {
		t.Errorf("%d BackOff events for %d waits, want at most 2 each", backoffs, len(pulls))
	}
}

// Deletion as the apiserver and kubelet do it: the pod is marked, its
// containers get their grace period, the agent deletes it when stopped.
func TestGracefulDeletion(t *testing.T) {
	cl := newCluster(t, sim.Config{}, "n1")
	cl.Node("n1").Runtime().SetImageBehavior("stubborn:1", fake.Behavior{IgnoreTERM: true})
	run(t, cl, time.Second)
	p := pod("stubborn", nil)
	p.Spec.Containers[0].Image = "stubborn:1"
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](20)
	create(t, cl, p)
	run(t, cl, 10*time.Second)
	if err := cl.DeletePod(context.Background(), "default", "stubborn"); err != nil {
		t.Fatal(err)
	}
	got := get(t, cl, "stubborn")
	if got.DeletionTimestamp == nil || ptr.Deref(got.DeletionGracePeriodSeconds, -1) != 20 {
		t.Fatalf("after delete: deletionTimestamp %v, grace %v; want set, 20", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}
	if want := cl.Clock().Now().Add(20 * time.Second).Truncate(time.Second); !got.DeletionTimestamp.Time.Equal(want) {
		t.Errorf("deletionTimestamp %v, want now+20s %v", got.DeletionTimestamp.Time, want)
	}
	run(t, cl, 19*time.Second)
	if _, err := cl.Pod("default", "stubborn"); err != nil {
		t.Fatalf("pod gone before its grace period ended: %v", err)
	}
	run(t, cl, 3*time.Second)
	if _, err := cl.Pod("default", "stubborn"); err == nil {
		t.Fatal("pod still stored 22s after a 20s graceful deletion")
	}
	kills := cl.Node("n1").Runtime().Kills()
	if len(kills) != 1 || kills[0].GracePeriod != 20 || !kills[0].Forced {
		t.Fatalf("kills %+v, want one forced after 20s", kills)
	}

	// A pod that stops on TERM goes at once; an unbound one at once too.
	create(t, cl, pod("quick", nil))
	run(t, cl, 5*time.Second)
	if err := cl.DeletePod(context.Background(), "default", "quick"); err != nil {
		t.Fatal(err)
	}
	run(t, cl, 2*time.Second)
	if _, err := cl.Pod("default", "quick"); err == nil {
		t.Fatal("a pod that stops on TERM is still stored 2s after its deletion")
	}
	if err := cl.DeletePod(context.Background(), "default", "quick"); err == nil {
		t.Fatal("deleting a deleted pod succeeded")
	}
}

// The agents write statuses back to the store: pods, Nodes and Leases.
func TestStatusesAreWrittenToTheStore(t *testing.T) {
	cl := newCluster(t, sim.Config{}, "n1")
	run(t, cl, time.Second)
	created := create(t, cl, pod("web", nil))
	if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() || created.Status.Phase != v1.PodPending {
		t.Fatalf("created pod lacks the apiserver's fields: %+v", created.ObjectMeta)
	}
	run(t, cl, 5*time.Second)
	p := get(t, cl, "web")
	if p.Status.Phase != v1.PodRunning || !podReady(p) || p.Status.PodIP == "" || p.Status.StartTime == nil ||
		len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("stored status %+v", p.Status)
	}
	if p.Spec.NodeName != "n1" || p.UID != created.UID || p.ResourceVersion == created.ResourceVersion {
		t.Fatalf("pod %s on %q uid %s rv %s", p.Name, p.Spec.NodeName, p.UID, p.ResourceVersion)
	}
	n, err := cl.Store().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := readyOf(n); r != v1.ConditionTrue {
		t.Fatalf("node Ready %s", r)
	}
	l1, err := cl.Store().Leases(v1.NamespaceNodeLease).Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run(t, cl, 10*time.Second)
	l2, _ := cl.Store().Leases(v1.NamespaceNodeLease).Get(context.Background(), "n1", metav1.GetOptions{})
	if got := l2.Spec.RenewTime.Sub(l1.Spec.RenewTime.Time); got != 10*time.Second {
		t.Fatalf("lease renewed after %v, want 10s", got)
	}
}

func readyOf(n *v1.Node) v1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func TestPodScripts(t *testing.T) {
	readiness := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"ready"}}}, PeriodSeconds: 1}
	tests := []struct {
		name   string
		ann    map[string]string
		policy v1.RestartPolicy
		probe  *v1.Probe
		// at is when check must first hold (virtual time after creation),
		// check must not hold a second before.
		at    time.Duration
		check func(p *v1.Pod) bool
	}{
		{"start delay holds the container in ContainerCreating", map[string]string{sim.StartDelayAnnotation: "30s"}, "", nil, 31 * time.Second,
			func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }},
		{"a container that exits 0 completes a Never pod", map[string]string{sim.ExitAnnotation: "app=1m:0"}, v1.RestartPolicyNever, nil, 61 * time.Second,
			func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded }},
		{"a container that exits 2 fails a Never pod", map[string]string{sim.ExitAnnotation: "1m:2"}, v1.RestartPolicyNever, nil, 61 * time.Second,
			func(p *v1.Pod) bool {
				return p.Status.Phase == v1.PodFailed && p.Status.ContainerStatuses[0].State.Terminated.ExitCode == 2
			}},
		{"an image that cannot be pulled", map[string]string{sim.PullErrorAnnotation: "manifest unknown"}, "", nil, time.Second,
			func(p *v1.Pod) bool {
				w := p.Status.ContainerStatuses[0].State.Waiting
				return w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff")
			}},
		{"readiness after a delay through the exec probe", map[string]string{sim.ReadyAfterAnnotation: "20s"}, "", readiness, 20 * time.Second,
			podReady},
		{"readiness after a delay through an httpGet probe", map[string]string{sim.ReadyAfterAnnotation: "20s"}, "",
			&v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
			20 * time.Second, podReady},
		{"readiness after a delay through a tcpSocket probe", map[string]string{sim.ReadyAfterAnnotation: "20s"}, "",
			&v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(5432)}}, PeriodSeconds: 1},
			20 * time.Second, podReady},
		{"readiness after a delay through a grpc probe", map[string]string{sim.ReadyAfterAnnotation: "20s"}, "",
			&v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9000}}, PeriodSeconds: 1},
			20 * time.Second, podReady},
		{"a bad annotation is a config error", map[string]string{sim.ExitAnnotation: "soon"}, "", nil, time.Second,
			func(p *v1.Pod) bool {
				w := p.Status.ContainerStatuses[0].State.Waiting
				return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, sim.ExitAnnotation)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, sim.Config{}, "n1")
			run(t, cl, time.Second)
			p := pod("p", tt.ann)
			p.Spec.RestartPolicy = tt.policy
			p.Spec.Containers[0].ReadinessProbe = tt.probe
			create(t, cl, p)
			check := func() bool {
				p := get(t, cl, "p")
				return len(p.Status.ContainerStatuses) == 1 && tt.check(p)
			}
			run(t, cl, tt.at-time.Second)
			if check() {
				t.Fatalf("holds already %v after creation: %+v", tt.at-time.Second, get(t, cl, "p").Status)
			}
			run(t, cl, time.Second)
			if !check() {
				t.Fatalf("does not hold %v after creation: %+v", tt.at, get(t, cl, "p").Status)
			}
		})
	}
}

// A stopped agent's lease runs out: the node lifecycle controller marks the
// Node Unknown, taints it and its pods not Ready. Restarted, the agent
// finds its pods still running.
func TestNodeFailureAndRestart(t *testing.T) {
	cl := newCluster(t, sim.Config{}, "n1", "n2")
	run(t, cl, time.Second)
	create(t, cl, pod("a", nil)) // n1: names break the tie
	run(t, cl, 5*time.Second)
	before := get(t, cl, "a")
	if before.Spec.NodeName != "n1" || !podReady(before) {
		t.Fatalf("pod on %s ready %v", before.Spec.NodeName, podReady(before))
	}
	n1 := cl.Node("n1")
	n1.Stop()
	nodeReady := func() v1.ConditionStatus {
		n, _ := cl.Store().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
		return readyOf(n)
	}
	run(t, cl, 30*time.Second)
	if r := nodeReady(); r != v1.ConditionTrue {
		t.Fatalf("Ready %s 30s after the agent stopped, want still True", r)
	}
	run(t, cl, 30*time.Second)
	if r := nodeReady(); r != v1.ConditionUnknown {
		t.Fatalf("Ready %s 60s after the agent stopped, want Unknown", r)
	}
	n, _ := cl.Store().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if !slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == v1.TaintNodeUnreachable }) {
		t.Errorf("no unreachable taint: %v", n.Spec.Taints)
	}
	if podReady(get(t, cl, "a")) {
		t.Error("pod of an unknown node still Ready")
	}
	if err := n1.Start(); err != nil {
		t.Fatal(err)
	}
	run(t, cl, 15*time.Second)
	if r := nodeReady(); r != v1.ConditionTrue {
		t.Fatalf("Ready %s after restart", r)
	}
	after := get(t, cl, "a")
	if !podReady(after) || after.Status.ContainerStatuses[0].RestartCount != 0 ||
		after.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID {
		t.Fatalf("pod after node restart: ready %v, %+v", podReady(after), after.Status.ContainerStatuses[0])
	}
}

// The runtimes' seeded faults: starts fail often, pods get there anyway.
func TestInjectedFaultsAreRetried(t *testing.T) {
	cl := newCluster(t, sim.Config{Seed: 7, Runtime: func(c *fake.Config) {
		c.FailureRates = map[string]float64{"StartContainer": 0.5, "CreatePodSandbox": 0.3}
	}}, "n1", "n2")
	run(t, cl, time.Second)
	for i := range 6 {
		create(t, cl, pod(fmt.Sprintf("p%d", i), nil))
	}
	err := cl.RunUntil(context.Background(), 10*time.Minute, func() bool {
		for _, p := range cl.ListPods() {
			if p.Status.Phase != v1.PodRunning {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Node("n1").Runtime().CallCount("StartContainer") <= 3 {
		t.Error("no start was retried")
	}
}

func TestBadRequestsAreRejected(t *testing.T) {
	cl := newCluster(t, sim.Config{}, "n1")
	ctx := context.Background()
	if _, err := cl.AddNode("n1"); !errors.Is(err, sim.ErrNodeExists) {
		t.Errorf("second n1: %v", err)
	}
	if _, err := sim.New(sim.Config{IdleTimeout: -1}); !errors.Is(err, sim.ErrInvalidConfig) {
		t.Errorf("negative IdleTimeout: %v", err)
	}
	if _, err := cl.CreatePod(ctx, &v1.Pod{}); err == nil {
		t.Error("pod without a name created")
	}
	create(t, cl, pod("x", nil))
	if _, err := cl.CreatePod(ctx, pod("x", nil)); err == nil {
		t.Error("pod created twice")
	}
	if _, err := cl.Pods("default").Patch(ctx, "x", "application/json-patch+json", []byte(`[]`), metav1.PatchOptions{}, "status"); err == nil {
		t.Error("JSON patch accepted")
	}
	rc, err := sim.New(sim.Config{Clock: clock.RealClock{}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := rc.RunFor(ctx, time.Second); !errors.Is(err, sim.ErrRealClock) {
		t.Errorf("RunFor on a real clock: %v", err)
	}
}

func TestHourOfThreeCrashLoopingNodes(t *testing.T) {
	cl := newCluster(t, sim.Config{Seed: 1}, "n1", "n2", "n3")
	run(t, cl, time.Second)
	for i := range 9 {
		create(t, cl, pod(fmt.Sprintf("p%d", i), map[string]string{sim.ExitAnnotation: "5s:1"}))
	}
	start := time.Now()
	run(t, cl, time.Hour)
	t.Logf("one virtual hour of 3 nodes with 9 crash-looping pods: %v real", time.Since(start))
	for _, p := range cl.ListPods() {
		if got := p.Status.ContainerStatuses[0].RestartCount; got < 10 {
			t.Errorf("%s restarted %d times in an hour", p.Name, got)
		}
	}
}

// A finalizer holds a deleted pod, stopped and with grace 0, until a
// controller removes it; then the pod goes.
func TestFinalizersHoldADeletedPod(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, sim.Config{}, "n1")
	p := pod("web", nil)
	p.Finalizers = []string{"example.com/keep"}
	create(t, cl, p)
	run(t, cl, 10*time.Second)
	if err := cl.DeletePod(ctx, "default", "web"); err != nil {
		t.Fatal(err)
	}
	run(t, cl, time.Minute)
	got := get(t, cl, "web")
	if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 0 {
		t.Fatalf("held pod: deletion %v grace %v", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}
	if cs := got.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil {
		t.Fatalf("held pod's container not stopped: %+v", cs)
	}
	got.Finalizers = nil
	if _, err := cl.Pods("default").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Pod("default", "web"); err == nil {
		t.Fatal("pod left after its last finalizer")
	}
}

// A pod already being deleted is deleted again only with a shorter grace
// period, whatever its phase, as by the apiserver: a controller's second
// eviction (its cache behind its first) of a pod that has just turned
// terminal leaves the pod to its agent, so that it does not go in the
// instant the agent's status lands or later by goroutine order.
func TestSecondDeleteLeavesADeletingPodToItsAgent(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, sim.Config{})
	p := pod("web", nil)
	p.Spec.NodeName = "gone" // no agent: the test writes its status
	create(t, cl, p)
	if err := cl.DeletePod(ctx, "default", "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Pods("default").Patch(ctx, "web", types.StrategicMergePatchType, []byte(`{"status":{"phase":"Succeeded"}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	for _, grace := range []*int64{nil, ptr.To[int64](30), ptr.To[int64](40)} {
		if err := cl.Pods("default").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: grace}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, cl, "web"); got.DeletionTimestamp == nil || ptr.Deref(got.DeletionGracePeriodSeconds, -1) != 30 {
			t.Fatalf("after a delete with grace %v: deletion %v, grace %v; want the first's, 30", ptr.Deref(grace, -1), got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
		}
	}
	if err := cl.Pods("default").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Pod("default", "web"); err == nil {
		t.Fatal("pod still stored after a delete with grace 0")
	}
	// A pod not being deleted yet goes at once when terminal.
	p = pod("done", nil)
	p.Spec.NodeName = "gone"
	create(t, cl, p)
	if _, err := cl.Pods("default").Patch(ctx, "done", types.StrategicMergePatchType, []byte(`{"status":{"phase":"Failed"}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeletePod(ctx, "default", "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Pod("default", "done"); err == nil {
		t.Fatal("a terminal pod is still stored after its deletion")
	}
}
