package simclient_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/e2e/simclient"
	"github.com/nodekit/nodekit/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// keepOne is a controller written against client-go: it keeps one pod
// named "singleton" and recreates it once it is gone.
func keepOne(ctx context.Context, cs kubernetes.Interface) error {
	pods := cs.CoreV1().Pods("default")
	for ctx.Err() == nil {
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=singleton"})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			if _, err := pods.Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "singleton"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
			}, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=singleton", ResourceVersion: list.ResourceVersion})
		if err != nil {
			return err
		}
	events:
		for {
			select {
			case <-ctx.Done():
				break events
			case ev, ok := <-w.ResultChan():
				if !ok || ev.Type == "DELETED" {
					break events
				}
			}
		}
		w.Stop()
	}
	return nil
}

// The same cluster through client-go: the controller creates through the
// fake clientset, the simulated node runs the pod, client-go reads the
// status the agent wrote; a graceful delete through client-go is carried
// out by the node and the controller replaces the pod.
func TestControllerOnClientGoDrivesTheSimulatedCluster(t *testing.T) {
	cl, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.AddNode("n1"); err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	simclient.Reactors(cs, cl.Store())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- keepOne(ctx, cs) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Error(err)
		}
	}()

	if err := cl.RunFor(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := cs.CoreV1().Pods("default").Get(ctx, "singleton", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != "n1" {
		t.Fatalf("through client-go: %s on %q", p.Status.Phase, p.Spec.NodeName)
	}
	first := p.UID
	if err := cs.CoreV1().Pods("default").Delete(ctx, "singleton", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if p, _ := cs.CoreV1().Pods("default").Get(ctx, "singleton", metav1.GetOptions{}); p == nil || p.DeletionTimestamp == nil {
		t.Fatal("a graceful delete through client-go did not mark the pod")
	}
	if err := cl.RunFor(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err = cs.CoreV1().Pods("default").Get(ctx, "singleton", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.UID == first || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("after deletion: uid %s (first %s), %s", p.UID, first, p.Status.Phase)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("nodes through client-go: %v, %v", nodes, err)
	}
}
