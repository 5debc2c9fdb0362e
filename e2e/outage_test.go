package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/internal/reltable"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/runtime/fake"
)

// listCounter counts the collection GETs that are not watches (LISTs) a
// client makes, per resource path.
type listCounter struct {
	rt    http.RoundTripper
	mu    sync.Mutex
	lists map[string]int
}

func (l *listCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && req.URL.Query().Get("watch") != "true" {
		p := req.URL.Path
		if strings.HasSuffix(p, "/pods") || strings.HasSuffix(p, "/nodes") || strings.HasSuffix(p, "/leases") {
			l.mu.Lock()
			l.lists[p]++
			l.mu.Unlock()
		}
	}
	return l.rt.RoundTrip(req)
}

func (l *listCounter) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.lists {
		n += v
	}
	return n
}

// TestAgentThroughAPIServerOutage stops the agent's apiserver for 60 s
// while its pods change state on the node (some complete, some fail) and in
// the API (pods created and deleted by a writer on a second apiserver), and
// compacts etcd meanwhile so the agent's watch comes back to 410 Gone.
// Afterwards every status converges, no terminal phase is lost or reverted
// (a watch on the writer's side sees every phase), the pod watch resumes
// with a single relist, the lease and the node status are renewed again,
// and the agent holds exactly the apiserver's pods.
func TestAgentThroughAPIServerOutage(t *testing.T) {
	down := 60 * time.Second
	if testing.Short() {
		down = 20 * time.Second
	}
	c := startCluster(t)
	ctx := t.Context()
	agentAPI := c.APIServer()
	writerAPI, err := c.AddAPIServer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counter := &listCounter{lists: map[string]int{}}
	agentCS, _ := clientset(t, agentAPI.RESTConfig(), 50, 100, func(rt http.RoundTripper) http.RoundTripper {
		counter.rt = rt
		return counter
	})
	writer, _ := clientset(t, writerAPI.RESTConfig(), 200, 400)

	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Pods of these images end during the outage.
	exitAfter := 10 * time.Second
	rt.SetImageBehavior("img-done", fake.Behavior{Exit: true, ExitAfter: exitAfter, ExitCode: 0})
	rt.SetImageBehavior("img-fail", fake.Behavior{Exit: true, ExitAfter: exitAfter, ExitCode: 3})
	a := startAgent(t, agentCS, rt, agent.Config{NodeName: "n1", RuntimeCheckPeriod: 200 * time.Millisecond,
		Node: &node.Config{Nodes: agentCS.CoreV1().Nodes(), Leases: agentCS.CoordinationV1().Leases(corev1.NamespaceNodeLease)}})
	waitNode(t, writer, "n1", 30*time.Second, readyIs(corev1.ConditionTrue, "kubelet is posting ready status"))

	// Every phase each pod goes through, as a watch on the writer's
	// apiserver sees it.
	var phasesMu sync.Mutex
	phases := map[string][]corev1.PodPhase{}
	w, err := writer.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			phasesMu.Lock()
			if h := phases[p.Name]; len(h) == 0 || h[len(h)-1] != p.Status.Phase {
				phases[p.Name] = append(h, p.Status.Phase)
			}
			phasesMu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); <-watchDone })

	mk := func(name, image string) {
		t.Helper()
		p := testPod(name, "n1")
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Containers[0].Image = image
		if _, err := writer.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		mk(fmt.Sprintf("long-%d", i), "img-long")
	}
	waitAllRunning(t, writer, "n1", 10)
	for i := range 5 {
		mk(fmt.Sprintf("done-%d", i), "img-done")
		mk(fmt.Sprintf("fail-%d", i), "img-fail")
	}
	waitAllRunning(t, writer, "n1", 20)
	leaseBefore := getLease(t, writer, "n1").Spec.RenewTime.Time

	agentAPI.Stop()
	stoppedAt := time.Now()
	for i := range 3 {
		mk(fmt.Sprintf("new-%d", i), "img-long")
	}
	zero := int64(0)
	for i := range 3 {
		if err := writer.CoreV1().Pods("default").Delete(ctx, fmt.Sprintf("long-%d", i), metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CompactEtcd(ctx); err != nil { // the agent's resourceVersion is gone: 410 on resume
		t.Fatal(err)
	}
	time.Sleep(down - time.Since(stoppedAt))
	listsBefore := counter.total()
	if err := agentAPI.Start(ctx); err != nil {
		t.Fatal(err)
	}
	startedAt := time.Now()

	want := map[string]corev1.PodPhase{}
	for i := 3; i < 10; i++ {
		want[fmt.Sprintf("long-%d", i)] = corev1.PodRunning
	}
	for i := range 3 {
		want[fmt.Sprintf("new-%d", i)] = corev1.PodRunning
	}
	for i := range 5 {
		want[fmt.Sprintf("done-%d", i)] = corev1.PodSucceeded
		want[fmt.Sprintf("fail-%d", i)] = corev1.PodFailed
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := writer.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", "n1").String()})
		if err != nil {
			return false, err
		}
		if len(list.Items) != len(want) {
			last = fmt.Sprintf("%d pods, want %d", len(list.Items), len(want))
			return false, nil
		}
		for _, p := range list.Items {
			if p.Status.Phase != want[p.Name] {
				last = fmt.Sprintf("%s is %q, want %q", p.Name, p.Status.Phase, want[p.Name])
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("statuses did not converge after the apiserver came back: %v; %s", err, last)
	}
	converged := time.Since(startedAt)

	// The agent holds exactly the apiserver's pods, once each.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		seen := map[types.UID]bool{}
		names := map[string]bool{}
		for _, p := range a.Pods() {
			if seen[p.UID] {
				last = "duplicate " + p.Name
				return false, nil
			}
			seen[p.UID] = true
			names[p.Name] = true
		}
		for name := range want {
			if !names[name] {
				last = "agent lacks " + name
				return false, nil
			}
		}
		if len(names) != len(want) {
			last = fmt.Sprintf("agent holds %d pods, want %d", len(names), len(want))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the agent's pods never matched the apiserver's: %v; %s", err, last)
	}

	// Lease and node status resume.
	var lease *coordinationv1.Lease
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		lease = getLease(t, writer, "n1")
		return lease.Spec.RenewTime.After(startedAt), nil
	})
	if err != nil {
		t.Fatalf("lease not renewed after the apiserver came back (renewed %v, before the outage %v)", lease.Spec.RenewTime, leaseBefore)
	}
	waitNode(t, writer, "n1", time.Minute, func(n *corev1.Node) string {
		if rc := nodeCondition(n, corev1.NodeReady); rc == nil || rc.Status != corev1.ConditionTrue || !rc.LastHeartbeatTime.After(startedAt.Add(-time.Second)) {
			return fmt.Sprintf("Ready %+v not posted since the apiserver came back", rc)
		}
		return ""
	})
	lists := counter.total() - listsBefore

	// Terminal phases are never lost or reverted.
	phasesMu.Lock()
	for name, h := range phases {
		terminal := false
		for _, ph := range h {
			if terminal && ph != corev1.PodSucceeded && ph != corev1.PodFailed {
				t.Errorf("pod %s went %v: a terminal phase was reverted", name, h)
			}
			terminal = terminal || ph == corev1.PodSucceeded || ph == corev1.PodFailed
		}
	}
	phasesMu.Unlock()
	counter.mu.Lock()
	t.Logf("lists after the restart: %d (%v)", lists, counter.lists)
	counter.mu.Unlock()
	if lists > 5 {
		t.Errorf("%d LIST calls after the apiserver came back: a resync storm", lists)
	}
	if !t.Failed() {
		reltable.Print(t, reltable.Row{
			Test: "e2e: TestAgentThroughAPIServerOutage",
			Done: fmt.Sprintf("the agent's kube-apiserver stopped %v while 5 pods completed, 5 failed, 3 were created and 3 deleted (via a second apiserver), etcd compacted (410 Gone on resume)", down),
			Held: fmt.Sprintf("all 20 statuses converged %v after the restarted apiserver was ready; no terminal phase lost or reverted; %d LISTs on resume; lease and node status renewed; the agent holds the apiserver's 20 pods, once each", converged.Round(100*time.Millisecond), lists),
			Run:  "cd e2e && go test -run APIServerOutage -v .",
		})
	}
}
