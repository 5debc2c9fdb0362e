package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/status"
)

// startAgent runs an agent for node on the in-memory runtime rt against cs
// (pod source, status and mirror pods) until t ends.
func startAgent(t *testing.T, cs *kubernetes.Clientset, rt *fake.Runtime, cfg agent.Config) *agent.Agent {
	t.Helper()
	cfg.Runtime = rt
	cfg.PodSource = cs.CoreV1().Pods("")
	cfg.StatusClient = func(ns string) status.PodClient { return cs.CoreV1().Pods(ns) }
	cfg.Nodes = cs.CoreV1().Nodes()
	cfg.NodeIPs = []string{"127.0.0.1"}
	if cfg.RelistPeriod == 0 {
		cfg.RelistPeriod = 200 * time.Millisecond
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, a)
	return a
}

// waitPod polls the pod until check returns "", and returns it.
func waitPod(t *testing.T, cs *kubernetes.Clientset, ns, name string, check func(*corev1.Pod) string) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	last := "not polled"
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = "not found"
			return false, nil
		}
		if err != nil {
			return false, err
		}
		got, last = p, check(p)
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: %v; last: %s", ns, name, err, last)
	}
	return got
}

func waitGone(t *testing.T, cs *kubernetes.Clientset, ns, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("pod %s/%s never went away: %v", ns, name, err)
	}
}

func runtimeHasPod(t *testing.T, rt *fake.Runtime, uid types.UID) bool {
	t.Helper()
	pods, err := rt.GetPods(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.ID == uid {
			return true
		}
	}
	return false
}

func TestAgentOnNode(t *testing.T) {
	c := startCluster(t)
	agentCS, _ := clientset(t, c.RESTConfig(), 50, 100)
	other, _ := clientset(t, c.RESTConfig(), 100, 200)
	ctx := t.Context()
	createNode(t, other, "n1")

	// Created before the agent starts: it must never be touched.
	foreign, err := other.CoreV1().Pods("default").Create(ctx, testPod("foreign", "n2"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rt.SetImageBehavior("fails:1", fake.Behavior{Exit: true, ExitCode: 3})
	manifests := t.TempDir()
	startAgent(t, agentCS, rt, agent.Config{NodeName: "n1", StaticPodPath: manifests, FileCheckFrequency: time.Second})

	t.Run("pods bound to the node reach Running with conditions and container statuses", func(t *testing.T) {
		two := testPod("two-containers", "n1")
		two.Spec.Containers = append(two.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox"})
		withInit := testPod("with-init", "n1")
		withInit.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
		withInit.Spec.InitContainers[0].Command = []string{"true"}
		rt.SetContainerBehavior("setup", fake.Behavior{Exit: true, ExitCode: 0})
		for _, p := range []*corev1.Pod{testPod("one", "n1"), two, withInit} {
			if _, err := other.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"one", "two-containers", "with-init"} {
			got := waitPod(t, other, "default", name, func(p *corev1.Pod) string { return checkRunning(p, "") })
			if name == "with-init" {
				ics := got.Status.InitContainerStatuses
				if len(ics) != 1 || ics[0].State.Terminated == nil || ics[0].State.Terminated.ExitCode != 0 || !ics[0].Ready {
					t.Fatalf("init container status %+v, want terminated with 0 and ready", ics)
				}
			}
		}
	})

	t.Run("a container that fails shows its exit code and the pod fails", func(t *testing.T) {
		p := testPod("fails", "n1")
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Containers[0].Image = "fails:1"
		if _, err := other.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPod(t, other, "default", "fails", func(p *corev1.Pod) string {
			cs := p.Status.ContainerStatuses
			if p.Status.Phase != corev1.PodFailed || len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 3 {
				return fmt.Sprintf("phase %q, container statuses %+v; want Failed with exit code 3", p.Status.Phase, cs)
			}
			if r := condition(&p.Status, corev1.PodReady); r == nil || r.Status != corev1.ConditionFalse {
				return fmt.Sprintf("Ready condition %+v, want False", r)
			}
			return ""
		})
	})

	t.Run("graceful deletion ends with the pod gone and stopped", func(t *testing.T) {
		p := waitPod(t, other, "default", "one", func(p *corev1.Pod) string { return checkRunning(p, "") })
		if err := other.CoreV1().Pods("default").Delete(ctx, "one", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, other, "default", "one")
		var kills []fake.Kill
		for _, k := range rt.Kills() {
			if k.PodUID == p.UID {
				kills = append(kills, k)
			}
		}
		// The apiserver gave the pod its default 30s; the container stopped
		// on TERM at once.
		if len(kills) != 1 || kills[0].GracePeriod != 30 || kills[0].Forced {
			t.Fatalf("pod %s left the apiserver with runtime kills %+v, want its container stopped once with grace period 30", p.UID, kills)
		}
	})

	t.Run("a static pod gets a mirror pod that is recreated and removed with its manifest", func(t *testing.T) {
		manifest := filepath.Join(manifests, "static.yaml")
		y := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: static\n  namespace: default\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
		if err := os.WriteFile(manifest, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		mirror := waitPod(t, other, "default", "static-n1", func(p *corev1.Pod) string {
			if !podutil.IsMirrorPod(p) {
				return fmt.Sprintf("no config.mirror annotation: %v", p.Annotations)
			}
			return checkRunning(p, "")
		})
		zero := int64(0)
		if err := other.CoreV1().Pods("default").Delete(ctx, "static-n1", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		waitPod(t, other, "default", "static-n1", func(p *corev1.Pod) string {
			if p.UID == mirror.UID || !podutil.IsMirrorPod(p) {
				return "not recreated yet"
			}
			return ""
		})
		if err := os.Remove(manifest); err != nil {
			t.Fatal(err)
		}
		waitGone(t, other, "default", "static-n1")
	})

	t.Run("a pod for another node is never touched", func(t *testing.T) {
		got, err := other.CoreV1().Pods("default").Get(ctx, "foreign", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != foreign.ResourceVersion || got.Status.Phase != corev1.PodPending || len(got.Status.Conditions) != 0 {
			t.Fatalf("pod on n2 was written: resourceVersion %s -> %s, phase %q, conditions %v",
				foreign.ResourceVersion, got.ResourceVersion, got.Status.Phase, got.Status.Conditions)
		}
		if runtimeHasPod(t, rt, foreign.UID) {
			t.Fatal("pod on n2 runs in n1's runtime")
		}
	})
}

func TestAgentLoad(t *testing.T) {
	const n = 500
	for _, tc := range []struct {
		name      string
		qps       float32
		burst     int
		maxPerPod float64
	}{
		// The kubelet's default client rate limits: they, not the agent, set
		// the pace.
		{name: "500 pods run with the kubelet's rate limits", qps: 50, burst: 100, maxPerPod: 10},
		{name: "500 pods run without client rate limits", qps: -1, maxPerPod: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t)
			agentCS, requests := clientset(t, c.RESTConfig(), tc.qps, tc.burst)
			other, _ := clientset(t, c.RESTConfig(), -1, 0)
			ctx := t.Context()
			createNode(t, other, "n1")
			rt, err := fake.New(fake.Config{})
			if err != nil {
				t.Fatal(err)
			}
			startAgent(t, agentCS, rt, agent.Config{NodeName: "n1", MaxPods: n + 10})

			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < n; i += 8 {
						if _, err := other.CoreV1().Pods("default").Create(ctx, testPod(fmt.Sprintf("load-%03d", i), "n1"), metav1.CreateOptions{}); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			created := time.Since(start)

			waitAllRunning(t, other, "n1", n)
			elapsed := time.Since(start)
			perPod := float64(requests.Load()) / n
			t.Logf("%d pods created in %v, all Running in the apiserver %v after the first was created; the agent made %d requests, %.2f per pod",
				n, created.Round(time.Millisecond), elapsed.Round(time.Millisecond), requests.Load(), perPod)
			// A pod's status goes out once per real change: a handful of
			// requests per pod, not a stream.
			if perPod > tc.maxPerPod {
				t.Fatalf("the agent made %.1f requests per pod, want at most %v", perPod, tc.maxPerPod)
			}
		})
	}
}

func TestAgentSurvivesAPIServerRestart(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()
	// The agent talks to one apiserver; the writer to another on the same
	// etcd, so pods change while the agent's apiserver is down.
	agentAPI := c.APIServer()
	writerAPI, err := c.AddAPIServer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	agentCS, _ := clientset(t, agentAPI.RESTConfig(), 50, 100)
	writer, _ := clientset(t, writerAPI.RESTConfig(), 200, 400)
	createNode(t, writer, "n1")
	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, agentCS, rt, agent.Config{NodeName: "n1"})

	create := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := writer.CoreV1().Pods("default").Create(ctx, testPod(fmt.Sprintf("p-%02d", i), "n1"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	create(0, 20)
	waitAllRunning(t, writer, "n1", 20)

	agentAPI.Stop()
	create(20, 30)
	zero := int64(0)
	for i := 0; i < 5; i++ { // gone for good before the agent can see a deletion
		if err := writer.CoreV1().Pods("default").Delete(ctx, fmt.Sprintf("p-%02d", i), metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CompactEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	if err := agentAPI.Start(ctx); err != nil {
		t.Fatal(err)
	}

	api := waitAllRunning(t, writer, "n1", 25)
	want := map[types.UID]string{}
	for _, p := range api {
		want[p.UID] = p.Name
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := map[types.UID]string{}
		for _, p := range a.Pods() {
			got[p.UID] = p.Name
		}
		running := map[types.UID]bool{}
		pods, err := rt.GetPods(ctx, false)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			running[p.ID] = true
		}
		last = fmt.Sprintf("agent has %d pods, runtime runs %d, apiserver has %d", len(got), len(running), len(want))
		if len(got) != len(want) || len(running) != len(want) {
			return false, nil
		}
		for uid := range want {
			if _, ok := got[uid]; !ok || !running[uid] {
				last = fmt.Sprintf("%s (%s): in agent %v, running %v", want[uid], uid, ok, running[uid])
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the agent's pods never matched the apiserver's: %v; %s", err, last)
	}
}

// waitAllRunning waits until node has exactly n pods, all Running, and
// returns them.
func waitAllRunning(t *testing.T, cs *kubernetes.Clientset, node string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
		if err != nil {
			return false, err
		}
		running, notRunning := 0, ""
		for i := range list.Items {
			if msg := checkRunning(&list.Items[i], ""); msg == "" {
				running++
			} else if notRunning == "" {
				notRunning = list.Items[i].Name + ": " + msg
			}
		}
		pods = list.Items
		last = fmt.Sprintf("%d of %d running (want %d); first not: %s", running, len(list.Items), n, notRunning)
		return running == n && len(list.Items) == n, nil
	})
	if err != nil {
		t.Fatalf("pods on %s did not all run: %v; %s", node, err, last)
	}
	return pods
}
