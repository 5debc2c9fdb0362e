package e2e

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/simclient/examples/replicaset"
)

// The ReplicaSet example controller of the simclient module, the code its
// sim test runs, runs unchanged against the real kube-apiserver: it
// creates the pods with its controller reference, reports them in the
// ReplicaSet's status and deletes the extra ones when scaled down (no
// scheduler or kubelet here: the pods stay Pending, which it counts).
func TestSimExampleControllerOnTheRealAPIServer(t *testing.T) {
	c := startCluster(t)
	cs, _ := clientset(t, c.RESTConfig(), 100, 200)
	ctx, cancel := context.WithCancel(t.Context())
	factory := informers.NewSharedInformerFactory(cs, 0)
	ctrl, err := replicaset.New(cs, factory, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx, 2) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		factory.Shutdown()
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
	created, err := cs.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := func(n int) wait.ConditionWithContextFunc {
		return func(ctx context.Context) (bool, error) {
			l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return false, err
			}
			live := 0
			for _, p := range l.Items {
				if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == created.UID && p.DeletionTimestamp == nil {
					live++
				}
			}
			got, err := cs.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
			return live == n && got.Status.Replicas == int32(n), err
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, owned(3)); err != nil {
		t.Fatalf("3 pods: %v", err)
	}
	if _, err := cs.AppsV1().ReplicaSets("default").Patch(ctx, "web", "application/merge-patch+json",
		[]byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, owned(1)); err != nil {
		t.Fatalf("scaled to 1: %v", err)
	}
}
