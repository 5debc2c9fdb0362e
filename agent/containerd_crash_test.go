package agent

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/reltable"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// crashContainerd is a containerd of the test's own (hack/containerd.sh up
// with its own temp dir, socket, bridge and subnet), which it may kill: the
// shared one other tests use is never touched.
type crashContainerd struct {
	t        *testing.T
	dir      string
	endpoint string
	image    string
}

func startCrashContainerd(t *testing.T) *crashContainerd {
	t.Helper()
	_, lookErr := exec.LookPath("containerd")
	if lookErr != nil || os.Geteuid() != 0 {
		msg := "containerd crash test needs root and containerd (apt-get install -y containerd runc containernetworking-plugins busybox-static)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cmd := exec.Command("bash", "../hack/containerd.sh", "up")
	cmd.Env = append(os.Environ(), "NODEKIT_BRIDGE=nkcrash0", "NODEKIT_SUBNET=10.244.78.0/24")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("starting the test's own containerd: %v\n%s", err, stderr.String())
	}
	c := &crashContainerd{t: t}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		switch k {
		case "NODEKIT_CONTAINERD_DIR":
			c.dir = v
		case "NODEKIT_CRI_ENDPOINT":
			c.endpoint = v
		case "NODEKIT_TEST_IMAGE":
			c.image = v
		}
	}
	if c.dir == "" || c.endpoint == "" || c.image == "" {
		t.Fatalf("containerd.sh up printed %q", out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", "../hack/containerd.sh", "down", c.dir).CombinedOutput(); err != nil {
			t.Errorf("containerd.sh down: %v\n%s", err, out)
		}
	})
	return c
}

func (c *crashContainerd) run(verb string) {
	c.t.Helper()
	if out, err := exec.Command("bash", "../hack/containerd.sh", verb, c.dir).CombinedOutput(); err != nil {
		c.t.Fatalf("containerd.sh %s: %v\n%s", verb, err, out)
	}
}

func (c *crashContainerd) crash()   { c.run("crash") }
func (c *crashContainerd) restart() { c.run("restart") }

// crashPodState is what the runtime holds of each pod: ready sandboxes and
// the IDs of running containers.
type crashPodState struct {
	readySandboxes int
	running        []string
}

func crashState(t *testing.T, m *cri.Manager) map[types.UID]crashPodState {
	t.Helper()
	var pods []*runtime.Pod
	var err error
	for range 50 {
		if pods, err = m.GetPods(context.Background(), true); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("GetPods: %v", err)
	}
	out := map[types.UID]crashPodState{}
	for _, p := range pods {
		var s crashPodState
		for _, sb := range p.Sandboxes {
			if sb.State == runtime.ContainerStateRunning {
				s.readySandboxes++
			}
		}
		for _, c := range p.Containers {
			if c.State == runtime.ContainerStateRunning {
				s.running = append(s.running, c.ID.ID)
			}
		}
		out[p.ID] = s
	}
	return out
}

// TestContainerdCrashes kills the agent's containerd (SIGKILL; shims and
// containers live on) while pods are starting and at steady state, then
// brings it back, and keeps it down for 30 s once: no pod may end up with
// two ready sandboxes, no running container may be recreated, every pod
// must reach Running; while containerd is down the node reports NotReady
// (runtime down, once RuntimeDownAfter has passed), the pods are not
// killed, and a pod added meanwhile starts once it is back.
func TestContainerdCrashes(t *testing.T) {
	cd := startCrashContainerd(t)
	ctx := context.Background()
	m, err := cri.New(ctx, cri.Config{Endpoint: cd.endpoint, PodLogsRoot: t.TempDir(), PodsRoot: t.TempDir(),
		CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	api := nodetest.New()
	c := Config{NodeName: "n1", Runtime: m, Sources: []string{src}, TerminateOnExit: true,
		ShutdownTimeout: 30 * time.Second, RelistPeriod: time.Second, RuntimeCheckPeriod: time.Second,
		// down (NotReady, no syncs) 5 s after the last ready answer, not the
		// kubelet's 30 s, so that the 30 s outage below shows it
		RuntimeDownAfter: 5 * time.Second,
		SyncFrequency:    5 * time.Second, SyncErrorBackOff: time.Second,
		CrashLoopBackOffInitial: time.Second, CrashLoopBackOffMax: 2 * time.Second,
		Node: &node.Config{Nodes: api.Nodes(), Leases: api.Leases(), UpdateFrequency: 500 * time.Millisecond}}
	r := start(t, c)

	mk := func(name string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("crash-" + name), CreationTimestamp: metav1.Now()},
			Spec: v1.PodSpec{NodeName: "n1", RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []v1.Container{{Name: "c", Image: cd.image, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"}}}},
		}
	}
	var pods []*v1.Pod
	for i := range 4 {
		pods = append(pods, mk(fmt.Sprintf("p%d", i)))
	}
	allRunning := func(what string, pods []*v1.Pod) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			ok := true
			for _, p := range pods {
				if got := r.pod(p.UID); got == nil || got.Status.Phase != v1.PodRunning || len(got.Status.ContainerStatuses) != 1 ||
					got.Status.ContainerStatuses[0].State.Running == nil {
					ok = false
				}
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: pods not all Running; runtime holds %+v", what, crashState(t, m))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	checkOneEach := func(what string, pods []*v1.Pod) map[types.UID]crashPodState {
		t.Helper()
		st := crashState(t, m)
		for _, p := range pods {
			if s := st[p.UID]; s.readySandboxes != 1 || len(s.running) != 1 {
				t.Errorf("%s: pod %s has %d ready sandboxes and %d running containers, want 1 and 1", what, p.Name, s.readySandboxes, len(s.running))
			}
		}
		return st
	}
	sameContainers := func(what string, before, after map[types.UID]crashPodState) int {
		t.Helper()
		recreated := 0
		for uid, b := range before {
			if a := after[uid]; len(a.running) != 1 || len(b.running) != 1 || a.running[0] != b.running[0] {
				recreated++
				t.Errorf("%s: pod %s ran %v, now %v: recreated", what, uid, b.running, a.running)
			}
		}
		return recreated
	}

	// 1. Killed while the pods start.
	start := time.Now()
	r.set(pods...)
	time.Sleep(300 * time.Millisecond)
	cd.crash()
	time.Sleep(2 * time.Second)
	cd.restart()
	allRunning("after a crash during start", pods)
	converge1 := time.Since(start)
	time.Sleep(3 * time.Second) // a few relists and resyncs
	steady := checkOneEach("after a crash during start", pods)

	// 2. Killed at steady state, back after 2 s.
	cd.crash()
	time.Sleep(2 * time.Second)
	cd.restart()
	time.Sleep(8 * time.Second) // relists and resyncs after the restart
	allRunning("after a crash at steady state", pods)
	after := checkOneEach("after a crash at steady state", pods)
	sameContainers("crash at steady state", steady, after)

	// 3. Down for 30 s.
	cd.crash()
	downAt := time.Now()
	waitFor(t, "node NotReady with the runtime's reason", func() bool {
		rc, ok := nodeReady(api)
		return ok && rc.Status == v1.ConditionFalse && strings.Contains(rc.Message, "runtime")
	})
	notReadyAfter := time.Since(downAt)
	late := mk("late")
	r.set(append(pods, late)...)
	for time.Since(downAt) < 30*time.Second {
		for _, p := range pods {
			if got := r.pod(p.UID); got == nil || got.Status.Phase != v1.PodRunning {
				t.Fatalf("pod %s is %v while containerd is down, want still Running", p.Name, got.Status.Phase)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	rc, _ := nodeReady(api)
	cd.restart()
	upAt := time.Now()
	allRunning("after 30 s down", append(pods, late))
	resumed := time.Since(upAt)
	waitFor(t, "node Ready again", func() bool { rc, ok := nodeReady(api); return ok && rc.Status == v1.ConditionTrue })
	final := checkOneEach("after 30 s down", append(pods, late))
	delete(final, late.UID)
	recreated := sameContainers("30 s down", after, final)

	if !t.Failed() {
		reltable.Print(t, reltable.Row{
			Test: "agent: TestContainerdCrashes",
			Done: "the agent's own containerd (not the shared one) SIGKILLed 300 ms after 4 pods were sent and back after 2 s; killed at steady state and back after 2 s; killed and kept down 30 s while a 5th pod is added",
			Held: fmt.Sprintf("every pod Running (first %v after the pods were sent); 1 ready sandbox per pod; %d of 4 containers recreated; during the 30 s pods stayed Running, the node went NotReady in %v (%q); the 5th pod Running %v after the restart",
				converge1.Round(100*time.Millisecond), recreated, notReadyAfter.Round(100*time.Millisecond), rc.Message, resumed.Round(100*time.Millisecond)),
			Run: "go test -run ContainerdCrashes -v ./agent (root, containerd installed)",
		})
	}
}
