package harness_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/examples/harness"
	"github.com/nodekit/nodekit/runtime/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func pod(name, node string, policy v1.RestartPolicy) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{NodeName: node, RestartPolicy: policy,
			Containers: []v1.Container{{Name: "app", Image: "app:1"}}},
	}
}

func newCluster(t *testing.T, nodes ...string) *harness.Cluster {
	t.Helper()
	c, err := harness.New(harness.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, n := range nodes {
		if _, err := c.AddNode(n); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// waitCtx bounds a wait so that a broken test fails rather than hangs.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func phases(pods []*v1.Pod) map[string]v1.PodPhase {
	out := map[string]v1.PodPhase{}
	for _, p := range pods {
		out[p.Name] = p.Status.Phase
	}
	return out
}

func runningContainers(t *testing.T, n *harness.Node, uid types.UID) int {
	t.Helper()
	st, err := n.Runtime().GetPodStatus(context.Background(), uid, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return len(st.RunningContainerStatuses())
}

// A pretend controller puts one pod on every node and waits for all to run;
// deleting one stops it on its node and leaves the others alone.
func TestControllerPodPerNode(t *testing.T) {
	nodes := []string{"node-a", "node-b", "node-c"}
	c := newCluster(t, nodes...)
	ctx := waitCtx(t)
	for _, n := range nodes {
		if err := c.Apply(ctx, pod("agent-"+n, n, v1.RestartPolicyAlways)); err != nil {
			t.Fatal(err)
		}
	}
	allRunning := func(want int) func([]*v1.Pod) bool {
		return func(pods []*v1.Pod) bool {
			if len(pods) != want {
				return false
			}
			for _, p := range pods {
				if p.Status.Phase != v1.PodRunning {
					return false
				}
			}
			return true
		}
	}
	if err := c.WaitFor(ctx, allRunning(len(nodes))); err != nil {
		t.Fatal(err, phases(c.Pods()))
	}
	var victim *v1.Pod
	for _, p := range c.Pods() {
		if p.Spec.NodeName != p.Name[len("agent-"):] {
			t.Errorf("pod %s ran on %s", p.Name, p.Spec.NodeName)
		}
		if p.Name == "agent-node-b" {
			victim = p
		}
		if n := runningContainers(t, c.Node(p.Spec.NodeName), p.UID); n != 1 {
			t.Errorf("node %s runs %d containers of %s, want 1", p.Spec.NodeName, n, p.Name)
		}
	}

	if err := c.Delete(ctx, "default", "agent-node-b"); err != nil {
		t.Fatal(err)
	}
	// The pod leaves the agent's list at once; its node then stops it.
	if err := c.WaitFor(ctx, func(pods []*v1.Pod) bool {
		return allRunning(len(nodes)-1)(pods) && runningContainers(t, c.Node("node-b"), victim.UID) == 0
	}); err != nil {
		t.Fatal(err, phases(c.Pods()))
	}
	for _, p := range c.Pods() {
		if n := runningContainers(t, c.Node(p.Spec.NodeName), p.UID); n != 1 {
			t.Errorf("pod %s disturbed by the deletion: %d containers", p.Name, n)
		}
	}
}

// A job-like pod completes on its node; the programmed runtime decides how.
func TestPodsCompleteAsTheNodeRuntimeIsProgrammed(t *testing.T) {
	tests := []struct {
		name string
		code int
		want v1.PodPhase
	}{
		{"exit 0 succeeds", 0, v1.PodSucceeded},
		{"exit 3 fails", 3, v1.PodFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, "n1")
			c.Node("n1").Runtime().SetContainerBehavior("app", fake.Behavior{Exit: true, ExitCode: tt.code})
			ctx := waitCtx(t)
			if err := c.Apply(ctx, pod("job", "n1", v1.RestartPolicyNever)); err != nil {
				t.Fatal(err)
			}
			if err := c.WaitFor(ctx, func(pods []*v1.Pod) bool {
				return len(pods) == 1 && pods[0].Status.Phase == tt.want
			}); err != nil {
				t.Fatal(err, phases(c.Pods()))
			}
		})
	}
}

// An updated pod keeps its UID; a changed image restarts its container.
func TestApplyReplacesPodKeepingItsUID(t *testing.T) {
	c := newCluster(t, "n1")
	ctx := waitCtx(t)
	p := pod("web", "n1", v1.RestartPolicyAlways)
	if err := c.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	running := func(image string) func([]*v1.Pod) bool {
		return func(pods []*v1.Pod) bool {
			if len(pods) != 1 || len(pods[0].Status.ContainerStatuses) != 1 {
				return false
			}
			cs := pods[0].Status.ContainerStatuses[0]
			return cs.State.Running != nil && cs.Image == image
		}
	}
	if err := c.WaitFor(ctx, running("app:1")); err != nil {
		t.Fatal(err)
	}
	uid := c.Pods()[0].UID
	p.Spec.Containers[0].Image = "app:2"
	if err := c.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFor(ctx, running("app:2")); err != nil {
		t.Fatal(err, c.Pods()[0].Status.ContainerStatuses)
	}
	if got := c.Pods()[0].UID; got != uid {
		t.Fatalf("UID changed from %s to %s", uid, got)
	}
}

func TestPodMovedToAnotherNodeRunsThereOnly(t *testing.T) {
	c := newCluster(t, "n1", "n2")
	ctx := waitCtx(t)
	p := pod("web", "n1", v1.RestartPolicyAlways)
	if err := c.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	on := func(node string) func([]*v1.Pod) bool {
		return func(pods []*v1.Pod) bool {
			return len(pods) == 1 && pods[0].Spec.NodeName == node && pods[0].Status.Phase == v1.PodRunning
		}
	}
	if err := c.WaitFor(ctx, on("n1")); err != nil {
		t.Fatal(err)
	}
	uid := c.Pods()[0].UID
	p.Spec.NodeName = "n2"
	if err := c.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFor(ctx, func(pods []*v1.Pod) bool {
		return on("n2")(pods) && runningContainers(t, c.Node("n1"), uid) == 0
	}); err != nil {
		t.Fatal(err, phases(c.Pods()))
	}
	if n := runningContainers(t, c.Node("n2"), uid); n != 1 {
		t.Fatalf("n2 runs %d containers of the moved pod, want 1", n)
	}
}

func TestBadRequestsAreRejected(t *testing.T) {
	c := newCluster(t, "n1")
	ctx := waitCtx(t)
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"pod without a node", func() error { return c.Apply(ctx, pod("x", "", v1.RestartPolicyAlways)) }, harness.ErrUnknownNode},
		{"pod on an unknown node", func() error { return c.Apply(ctx, pod("x", "n9", v1.RestartPolicyAlways)) }, harness.ErrUnknownNode},
		{"delete of an unknown pod", func() error { return c.Delete(ctx, "default", "x") }, harness.ErrNotFound},
		{"node added twice", func() error { _, err := c.AddNode("n1"); return err }, harness.ErrNodeExists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	if n := len(c.Pods()); n != 0 {
		t.Fatalf("%d pods after rejected requests", n)
	}
}

func TestWaitForEndsWithItsContext(t *testing.T) {
	c := newCluster(t, "n1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.WaitFor(ctx, func([]*v1.Pod) bool { return false }); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitFor = %v, want context.Canceled", err)
	}
}

func TestCloseStopsEveryPod(t *testing.T) {
	c, err := harness.New(harness.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := waitCtx(t)
	var nodes []*harness.Node
	for i := range 2 {
		n, err := c.AddNode(fmt.Sprintf("n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
		if err := c.Apply(ctx, pod(fmt.Sprintf("p%d", i), n.Name(), v1.RestartPolicyAlways)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitFor(ctx, func(pods []*v1.Pod) bool {
		return len(pods) == 2 && pods[0].Status.Phase == v1.PodRunning && pods[1].Status.Phase == v1.PodRunning
	}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for _, n := range nodes {
		left, err := n.Runtime().GetPods(context.Background(), true)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 0 {
			t.Errorf("node %s keeps %d pods after Close", n.Name(), len(left))
		}
	}
	if err := c.Apply(ctx, pod("late", "n0", v1.RestartPolicyAlways)); !errors.Is(err, harness.ErrClosed) {
		t.Fatalf("Apply after Close = %v, want ErrClosed", err)
	}
}
