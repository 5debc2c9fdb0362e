package procruntime

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newPod(policy v1.RestartPolicy, init []v1.Container, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec: v1.PodSpec{RestartPolicy: policy, InitContainers: init, Containers: containers,
			TerminationGracePeriodSeconds: ptr.To[int64](1)},
	}
}

func sh(name, script string) v1.Container {
	return v1.Container{Name: name, Image: "local", Command: []string{"sh", "-c", script}}
}

// converge syncs until cond holds on the pod's status or the deadline passes.
func converge(t *testing.T, r *Runtime, pod *v1.Pod, cond func(*runtime.PodStatus) bool) *runtime.PodStatus {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := r.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod did not converge; last status: %+v", st)
		}
		res := r.SyncPod(ctx, pod, st, nil, nil)
		if err := res.Error(); err != nil {
			t.Fatalf("SyncPod: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func state(st *runtime.PodStatus, name string) runtime.ContainerState {
	if c := st.FindContainerStatusByName(name); c != nil {
		return c.State
	}
	return ""
}

func TestInitContainerRunsBeforeMainContainer(t *testing.T) {
	r, err := New(Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pod := newPod(v1.RestartPolicyAlways, []v1.Container{sh("init", "echo init-done")}, sh("main", "echo hello; exec sleep 30"))
	st := converge(t, r, pod, func(st *runtime.PodStatus) bool { return state(st, "main") == runtime.ContainerStateRunning })

	initSt := st.FindContainerStatusByName("init")
	if initSt == nil || initSt.State != runtime.ContainerStateExited || initSt.ExitCode != 0 {
		t.Fatalf("init container: %+v, want exited 0", initSt)
	}
	if main := st.FindContainerStatusByName("main"); main.StartedAt.Before(initSt.FinishedAt) {
		t.Fatalf("main started %v before init finished %v", main.StartedAt, initSt.FinishedAt)
	}
	b, err := os.ReadFile(r.logPath(pod, "init", 0))
	if err != nil || strings.TrimSpace(string(b)) != "init-done" {
		t.Fatalf("init log = %q, %v; want init-done", b, err)
	}

	// KillPod stops the sleeping container within the grace period.
	pods, _ := r.GetPods(context.Background(), false)
	if len(pods) != 1 {
		t.Fatalf("GetPods(running) = %d pods, want 1", len(pods))
	}
	if err := r.KillPod(context.Background(), pod, *pods[0], nil); err != nil {
		t.Fatal(err)
	}
	st, _ = r.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if state(st, "main") != runtime.ContainerStateExited || st.ReadySandbox() != nil {
		t.Fatalf("after KillPod: main %s, ready sandbox %v", state(st, "main"), st.ReadySandbox())
	}
	if pods, _ := r.GetPods(context.Background(), false); len(pods) != 0 {
		t.Fatalf("GetPods(running) after KillPod = %d pods, want 0", len(pods))
	}
}

func TestExitCodesUnderRestartPolicyNever(t *testing.T) {
	r, err := New(Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pod := newPod(v1.RestartPolicyNever, nil, sh("ok", "exit 0"), sh("bad", "exit 3"))
	st := converge(t, r, pod, func(st *runtime.PodStatus) bool {
		return state(st, "ok") == runtime.ContainerStateExited && state(st, "bad") == runtime.ContainerStateExited
	})
	if got := st.FindContainerStatusByName("bad").ExitCode; got != 3 {
		t.Errorf("bad exit code = %d, want 3", got)
	}
	// Nothing restarts: another sync starts no container.
	res := r.SyncPod(context.Background(), pod, st, nil, nil)
	for _, s := range res.SyncResults {
		if s.Action == runtime.StartContainer {
			t.Errorf("SyncPod started %s under RestartPolicy Never", s.Target)
		}
	}
}

func TestContainerWithoutCommandFailsClearly(t *testing.T) {
	r, err := New(Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pod := newPod(v1.RestartPolicyAlways, nil, v1.Container{Name: "img-only", Image: "nginx"})
	st, _ := r.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	res := r.SyncPod(context.Background(), pod, st, nil, nil)
	if got := runtime.Reason(res.Error()); got != runtime.ErrCreateContainerConfig.Error() {
		t.Fatalf("reason = %q (%v), want CreateContainerConfigError", got, res.Error())
	}
}

func TestNewRejectsMissingRoot(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without Root succeeded")
	}
}
