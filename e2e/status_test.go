package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// startStatusManager runs a status manager for node against cs until t ends.
func startStatusManager(t *testing.T, cs *kubernetes.Clientset, cfg status.Config) *status.Manager {
	t.Helper()
	cfg.PodClient = func(ns string) status.PodClient { return cs.CoreV1().Pods(ns) }
	sm, err := status.NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sm.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return sm
}

// runningStatus is the runtime's view of pod with its containers started.
func runningStatus(pod *corev1.Pod, ip string, started time.Time) *runtime.PodStatus {
	rs := &runtime.PodStatus{
		ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace, IPs: []string{ip},
		SandboxStatuses: []*runtime.SandboxStatus{{
			ID: "sandbox-" + string(pod.UID), State: runtime.SandboxStateReady, CreatedAt: started, IPs: []string{ip},
		}},
	}
	for _, c := range pod.Spec.Containers {
		rs.ContainerStatuses = append(rs.ContainerStatuses, &runtime.ContainerStatus{
			ID:    runtime.ContainerID{Type: "fake", ID: string(pod.UID) + "-" + c.Name},
			Name:  c.Name,
			State: runtime.ContainerStateRunning, CreatedAt: started, StartedAt: started,
			Image: c.Image, ImageID: "sha256:" + c.Name, Hash: runtime.HashContainer(&c),
		})
	}
	return rs
}

// conflictOnce answers the first status PATCH of every pod with 409 Conflict,
// as the apiserver does when a precondition fails, and counts the injections.
type conflictOnce struct {
	rt       http.RoundTripper
	mu       sync.Mutex
	seen     map[string]bool
	injected int
}

func (c *conflictOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/status") {
		c.mu.Lock()
		first := !c.seen[req.URL.Path]
		if first {
			if c.seen == nil {
				c.seen = map[string]bool{}
			}
			c.seen[req.URL.Path] = true
			c.injected++
		}
		c.mu.Unlock()
		if first {
			body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
				`"message":"injected: the object has been modified","reason":"Conflict","code":409}`
			return &http.Response{
				StatusCode: http.StatusConflict, Status: "409 Conflict", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header:  http.Header{"Content-Type": []string{"application/json"}},
				Body:    io.NopCloser(strings.NewReader(body)),
				Request: req,
			}, nil
		}
	}
	return c.rt.RoundTrip(req)
}

func (c *conflictOnce) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.injected
}

// statusCode counts the responses with one HTTP status code.
type statusCode struct {
	rt   http.RoundTripper
	code int
	mu   sync.Mutex
	n    int
}

func (s *statusCode) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.rt.RoundTrip(req)
	if err == nil && resp.StatusCode == s.code {
		s.mu.Lock()
		s.n++
		s.mu.Unlock()
	}
	return resp, err
}

func (s *statusCode) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func condition(st *corev1.PodStatus, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func TestStatusSurvivesConcurrentWriters(t *testing.T) {
	const pods, rounds = 5, 6
	c := startCluster(t)
	injector := &conflictOnce{}
	agentCS, _ := clientset(t, c.RESTConfig(), 50, 100, func(rt http.RoundTripper) http.RoundTripper {
		injector.rt = rt
		return injector
	})
	conflicts := &statusCode{code: http.StatusConflict}
	other, _ := clientset(t, c.RESTConfig(), 100, 200, func(rt http.RoundTripper) http.RoundTripper {
		conflicts.rt = rt
		return conflicts
	})
	ctx := t.Context()

	var created []*corev1.Pod
	for i := range pods {
		p, err := other.CoreV1().Pods("default").Create(ctx, testPod(fmt.Sprintf("writers-%d", i), "n1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, p)
	}
	sm := startStatusManager(t, agentCS, status.Config{NodeName: "n1", SyncPeriod: 500 * time.Millisecond, ConflictRetries: 5})

	// Each round, for every pod: the other client reads the pod, the agent
	// reports a new status (the pod IP moves, the containers start halfway),
	// and once that status is in the apiserver the other client writes a
	// label from its stale read, meets a real conflict and retries, then adds
	// a condition of its own with a read-modify-write of the status.
	start := time.Now().Truncate(time.Second)
	ip := func(r, i int) string { return fmt.Sprintf("10.1.%d.%d", r, i+1) }
	for r := range rounds {
		for i, p := range created {
			pods := other.CoreV1().Pods("default")
			stale, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}

			rs := runningStatus(p, ip(r, i), start)
			if r < rounds/2 {
				for _, cs := range rs.ContainerStatuses {
					cs.State, cs.StartedAt = runtime.ContainerStateCreated, time.Time{}
				}
			}
			var old *corev1.PodStatus
			if s, ok := sm.GetPodStatus(p.UID); ok {
				old = &s
			}
			sm.SetPodStatus(p, status.GeneratePodStatus(p, rs, old, status.GenerateOptions{HostIPs: []string{"127.0.0.1"}}))
			err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				got, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
				return err == nil && got.Status.PodIP == ip(r, i), err
			})
			if err != nil {
				t.Fatalf("round %d: the agent's status of %s never reached the apiserver: %v", r, p.Name, err)
			}

			cur := stale
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if cur == nil {
					if cur, err = pods.Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
						return err
					}
				}
				if cur.Labels == nil {
					cur.Labels = map[string]string{}
				}
				cur.Labels["round"] = strconv.Itoa(r)
				_, err := pods.Update(ctx, cur, metav1.UpdateOptions{})
				cur = nil
				return err
			})
			if err != nil {
				t.Fatalf("round %d: labelling %s: %v", r, p.Name, err)
			}
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{
					Type: corev1.PodConditionType(fmt.Sprintf("example.com/gate-%d", r)), Status: corev1.ConditionTrue,
					LastTransitionTime: metav1.Now(),
				})
				_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatalf("round %d: adding a condition to %s: %v", r, p.Name, err)
			}
		}
	}

	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for i, p := range created {
			got, err := other.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if msg := checkRunning(got, ip(rounds-1, i)); msg != "" {
				last = p.Name + ": " + msg
				return false, nil
			}
			for r := range rounds {
				if cond := condition(&got.Status, corev1.PodConditionType(fmt.Sprintf("example.com/gate-%d", r))); cond == nil || cond.Status != corev1.ConditionTrue {
					last = fmt.Sprintf("%s: the other writer's condition gate-%d was lost: %v", p.Name, r, got.Status.Conditions)
					return false, nil
				}
			}
			if got.Labels["round"] != strconv.Itoa(rounds-1) {
				last = fmt.Sprintf("%s: label round=%q, want %d", p.Name, got.Labels["round"], rounds-1)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("statuses did not converge: %v; last: %s", err, last)
	}
	if got := injector.count(); got != pods {
		t.Fatalf("injected %d conflicts, want one per pod (%d): the agent did not patch every pod", got, pods)
	}
	if got := conflicts.count(); got < pods*rounds {
		t.Fatalf("the other writer met %d conflicts, want at least %d: the writes did not race", got, pods*rounds)
	}
}

// checkRunning says what in got differs from a running, ready pod with IP ip
// (any, if empty) and one running container per spec container; "" if
// nothing.
func checkRunning(got *corev1.Pod, ip string) string {
	st := &got.Status
	if st.Phase != corev1.PodRunning {
		return fmt.Sprintf("phase %q, want Running", st.Phase)
	}
	if (ip != "" && st.PodIP != ip) || st.PodIP == "" || st.HostIP != "127.0.0.1" || st.StartTime == nil {
		return fmt.Sprintf("podIP %q hostIP %q startTime %v, want %s, 127.0.0.1 and a start time", st.PodIP, st.HostIP, st.StartTime, ip)
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		if cond := condition(st, t); cond == nil || cond.Status != corev1.ConditionTrue {
			return fmt.Sprintf("condition %s is %+v, want True", t, cond)
		}
	}
	if len(st.ContainerStatuses) != len(got.Spec.Containers) {
		return fmt.Sprintf("%d container statuses, want %d", len(st.ContainerStatuses), len(got.Spec.Containers))
	}
	for i, cs := range st.ContainerStatuses {
		spec := got.Spec.Containers[i]
		if cs.Name != spec.Name || cs.State.Running == nil || !cs.Ready || cs.Started == nil || !*cs.Started ||
			cs.Image != spec.Image || cs.ContainerID == "" || cs.RestartCount != 0 {
			return fmt.Sprintf("container status %+v, want %s running, ready and started from %s", cs, spec.Name, spec.Image)
		}
	}
	return ""
}
