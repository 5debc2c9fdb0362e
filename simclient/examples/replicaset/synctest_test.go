//go:build !race

// Without the race detector only: go1.26's race runtime crashes
// intermittently in synctest bubbles (see sim's synctest_test.go); .ci/run
// runs it without -race.

package replicaset_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/sim"
	"github.com/nodekit/nodekit/simclient"
	"github.com/nodekit/nodekit/simclient/examples/replicaset"
)

// Inside a testing/synctest bubble the whole path (client-go, the
// transport, the Server, the agents) runs on the real clock, which the
// bubble makes virtual: the controller needs no clock of the cluster's,
// and client-go's own timers (WaitForCacheSync's polling) are virtual too.
func TestReplicaSetInSynctestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cl, err := sim.New(sim.Config{Clock: clock.RealClock{}})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		srv, err := simclient.New(cl, simclient.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		if _, err := cl.AddNode("n1"); err != nil {
			t.Fatal(err)
		}
		cs, err := srv.Clientset()
		if err != nil {
			t.Fatal(err)
		}
		factory := informers.NewSharedInformerFactory(cs, 0)
		ctrl, err := replicaset.New(cs, factory, clock.RealClock{})
		if err != nil {
			t.Fatal(err)
		}
		factory.Start(ctx.Done())
		done := make(chan error, 1)
		go func() { done <- ctrl.Run(ctx, 1) }()
		defer func() {
			cancel()
			<-done
			factory.Shutdown()
		}()
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: appsv1.ReplicaSetSpec{
				Replicas: ptr.To[int32](2),
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
		time.Sleep(time.Hour)
		got, err := cs.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || got.Status.ReadyReplicas != 2 {
			t.Fatalf("after an hour: %+v %v", got.Status, err)
		}
	})
}
