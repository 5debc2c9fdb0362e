package replicaset_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/sim"
	"github.com/nodekit/nodekit/simclient"
	"github.com/nodekit/nodekit/simclient/examples/replicaset"
)

// An hour of a ReplicaSet on three nodes, on virtual time: it fills up,
// scales through the scale subresource, replaces the pods of a node that
// died once they are evicted, and its pods go with it when it is deleted.
func TestReplicaSetForAnHour(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := sim.New(sim.Config{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	srv, err := simclient.New(cl, simclient.Config{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, n := range []string{"n1", "n2", "n3"} {
		if _, err := cl.AddNode(n); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := srv.Clientset()
	if err != nil {
		t.Fatal(err)
	}

	// The controller, as it would run in a cluster: its own informers
	// (client-go's default, watch-list) on the clientset.
	factory := informers.NewSharedInformerFactory(cs, 0)
	ctrl, err := replicaset.New(cs, factory, cl.Clock())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	// Before the clock runs: WaitForCacheSync polls on the wall clock.
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v not synced", typ)
		}
	}
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx, 2) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}}},
			},
		},
	}
	if _, err := cs.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := func(n int) func() bool {
		return func() bool {
			l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "status.phase=Running"})
			if err != nil {
				t.Fatal(err)
			}
			live := 0
			for _, p := range l.Items {
				if p.DeletionTimestamp == nil {
					live++
				}
			}
			return live == n
		}
	}
	if err := cl.RunUntil(ctx, time.Minute, running(3)); err != nil {
		t.Fatalf("3 pods running: %v", err)
	}
	got, _ := cs.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
	if err := cl.RunUntil(ctx, time.Minute, func() bool {
		got, _ = cs.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
		return got.Status.ReadyReplicas == 3
	}); err != nil {
		t.Fatalf("status: %+v: %v", got.Status, err)
	}

	// Scale through the scale subresource, as kubectl scale does.
	if _, err := cs.AppsV1().ReplicaSets("default").UpdateScale(ctx, "web",
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: autoscalingv1.ScaleSpec{Replicas: 5}},
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.RunUntil(ctx, time.Minute, running(5)); err != nil {
		t.Fatalf("5 pods running: %v", err)
	}

	// n1's agent dies: its Node goes Unknown after the grace period, its
	// pods are evicted 300s after the unreachable taint, and the
	// controller replaces them on the other nodes.
	onN1 := podsOn(t, cs, "n1")
	if len(onN1) == 0 {
		t.Fatal("no pod on n1")
	}
	cl.Node("n1").Stop()
	if err := cl.RunFor(ctx, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if !running(5)() {
		t.Fatalf("after n1 died: %v", podsOn(t, cs, ""))
	}
	for _, p := range podsOn(t, cs, "") {
		if strings.HasPrefix(p, "n1/") {
			t.Errorf("pod still on the dead node: %s", p)
		}
	}

	// The rest of the hour: nothing changes.
	if err := cl.RunFor(ctx, 40*time.Minute); err != nil {
		t.Fatal(err)
	}
	if !running(5)() {
		t.Fatalf("at the end: %v", podsOn(t, cs, ""))
	}

	// Deleting the ReplicaSet deletes its pods (the garbage collector).
	if err := cs.AppsV1().ReplicaSets("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.RunUntil(ctx, 5*time.Minute, func() bool {
		l, _ := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: labels.Set{"app": "web"}.String()})
		// n1's evicted pods stay Terminating: their agent is gone.
		for _, p := range l.Items {
			if p.Spec.NodeName != "n1" {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("pods left after the ReplicaSet: %v", podsOn(t, cs, ""))
	}
}

// podsOn lists the live web pods as node/name, those of one node if set.
func podsOn(t *testing.T, cs kubernetes.Interface, node string) []string {
	t.Helper()
	l, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && (node == "" || p.Spec.NodeName == node) {
			out = append(out, fmt.Sprintf("%s/%s %s", p.Spec.NodeName, p.Name, p.Status.Phase))
		}
	}
	return out
}
