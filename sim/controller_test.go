package sim_test

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit/sim"
)

// replicaSet is a pretend controller under test: it keeps Replicas pods
// labelled app=Name, replacing finished ones, through the store's client
// as a real controller would through client-go.
type replicaSet struct {
	Name     string
	Replicas int
	Template v1.PodSpec
	Ann      map[string]string
	Pods     *sim.PodClient
	// KeepFailed leaves finished pods for the test to read, as a real
	// ReplicaSet does (the pod GC collects them); default deleted.
	KeepFailed bool

	mu      sync.Mutex
	created int
}

func (r *replicaSet) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		list, err := r.Pods.List(ctx, metav1.ListOptions{LabelSelector: "app=" + r.Name})
		if err != nil {
			return err
		}
		r.reconcile(ctx, list.Items)
		w, err := r.Pods.Watch(ctx, metav1.ListOptions{LabelSelector: "app=" + r.Name, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				break
			}
			list, err := r.Pods.List(ctx, metav1.ListOptions{LabelSelector: "app=" + r.Name})
			if err != nil {
				w.Stop()
				return err
			}
			r.reconcile(ctx, list.Items)
		}
		w.Stop()
	}
	return nil
}

func (r *replicaSet) reconcile(ctx context.Context, pods []v1.Pod) {
	active := 0
	for _, p := range pods {
		switch {
		case p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded:
			if !r.KeepFailed {
				_ = r.Pods.Delete(ctx, p.Name, metav1.DeleteOptions{})
			}
		case p.DeletionTimestamp == nil:
			active++
		}
	}
	for ; active < r.Replicas; active++ {
		r.mu.Lock()
		r.created++
		r.mu.Unlock()
		_, _ = r.Pods.Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: r.Name + "-", Labels: map[string]string{"app": r.Name}, Annotations: r.Ann},
			Spec:       *r.Template.DeepCopy(),
		}, metav1.CreateOptions{})
	}
}

// The controller keeps three replicas of pods that fail after 30s: the
// agents run and fail them, the store reports it, the controller deletes
// and replaces them; at every step at most three are active.
func TestReplicaSetControllerEndToEnd(t *testing.T) {
	cl := newCluster(t, sim.Config{Seed: 3}, "n1", "n2", "n3")
	rs := &replicaSet{Name: "worker", Replicas: 3, Pods: cl.Pods("default"),
		Ann:      map[string]string{sim.ExitAnnotation: "30s:1"},
		Template: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: "w", Image: "worker:1"}}}}
	// The controller starts with the agents: its first pods are bound to
	// nodes whose pod sources are still between their list and their watch.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rs.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	maxActive, nodes := 0, map[string]bool{}
	err := cl.RunUntil(ctx, 10*time.Minute, func() bool {
		active := 0
		for _, p := range cl.ListPods() {
			if p.DeletionTimestamp == nil && p.Status.Phase != v1.PodFailed {
				active++
			}
			nodes[p.Spec.NodeName] = true
		}
		maxActive = max(maxActive, active)
		return false
	})
	if err == nil {
		t.Fatal("RunUntil of a never-true condition returned nil")
	}
	if maxActive != 3 {
		t.Errorf("at most %d pods active at once, want 3", maxActive)
	}
	if len(nodes) != 3 {
		t.Errorf("pods ran on %d nodes, want spread over 3", len(nodes))
	}
	running := 0
	for _, p := range cl.ListPods() {
		if p.Status.Phase == v1.PodRunning {
			running++
		}
	}
	rs.mu.Lock()
	created := rs.created
	rs.mu.Unlock()
	// Each generation lives 30s plus a relist and a status sync; ten
	// minutes see well over fifteen generations of three.
	if created < 45 || running == 0 {
		t.Errorf("created %d pods, %d running now", created, running)
	}
	// A failed pod is deleted in the instant its status says so.
	deleted := 0
	for _, e := range cl.Events() {
		if e.What == "deleted" {
			deleted++
		}
	}
	if deleted != created-3 {
		t.Errorf("%d pods deleted of %d created, want all but the 3 current", deleted, created)
	}
}
