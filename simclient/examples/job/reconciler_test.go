package job_test

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodekit/nodekit/sim"
	"github.com/nodekit/nodekit/simclient"
	"github.com/nodekit/nodekit/simclient/examples/job"
	"github.com/nodekit/nodekit/simclient/simctrl"
)

// An hour of Jobs on two nodes, on virtual time, through a
// controller-runtime manager: one Job runs its six completions two at a
// time and completes; one whose pods fail is marked Failed after its
// back-off limit; deleting a Job deletes its pods.
func TestJobsForAnHour(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := sim.New(sim.Config{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	srv, err := simclient.New(cl, simclient.Config{Seed: 11, Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, n := range []string{"n1", "n2"} {
		if _, err := cl.AddNode(n); err != nil {
			t.Fatal(err)
		}
	}

	// The manager as in a cluster, but for what would run on the wall
	// clock (simctrl's options) and a workqueue on the cluster's clock.
	queues := simctrl.NewQueues(cl.Clock())
	mgr, err := ctrl.NewManager(srv.RESTConfig(), simctrl.ManagerOptions(scheme))
	if err != nil {
		t.Fatal(err)
	}
	if err := (&job.Reconciler{Client: mgr.GetClient(), Clock: cl.Clock()}).SetupWithManager(mgr, queues.Options()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// Before the clock runs: the controller starts on the wall clock.
	if err := queues.WaitReady(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c := mgr.GetClient()

	newJob := func(name, exit string, completions int32) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: batchv1.JobSpec{
				Completions: ptr.To(completions), Parallelism: ptr.To[int32](2), BackoffLimit: ptr.To[int32](2),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{sim.ExitAnnotation: exit}},
					Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: "work", Image: "work:1"}}},
				},
			},
		}
	}
	for _, j := range []*batchv1.Job{newJob("ok", "30s:0", 6), newJob("bad", "10s:1", 1)} {
		if err := c.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	start := cl.Clock().Now()
	condition := func(name string, typ batchv1.JobConditionType) (bool, time.Duration) {
		var j batchv1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &j); err != nil {
			t.Fatal(err)
		}
		for _, cond := range j.Status.Conditions {
			if cond.Type == typ && cond.Status == corev1.ConditionTrue {
				return true, cond.LastTransitionTime.Sub(start)
			}
		}
		return false, 0
	}
	if err := cl.RunFor(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	// Three rounds of two 30 s pods, each started within seconds.
	if ok, at := condition("ok", batchv1.JobComplete); !ok || at < 90*time.Second || at > 3*time.Minute {
		t.Errorf("job ok complete %v after %v, want within 90s..3m", ok, at)
	}
	if ok, _ := condition("bad", batchv1.JobFailed); !ok {
		t.Error("job bad not failed")
	}
	var j batchv1.Job
	_ = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "ok"}, &j)
	if j.Status.Succeeded != 6 || j.Status.Active != 0 {
		t.Errorf("job ok status %+v", j.Status)
	}
	_ = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "bad"}, &j)
	if j.Status.Failed != 3 {
		t.Errorf("job bad failed %d times, want 3 (back-off limit 2)", j.Status.Failed)
	}

	// Deleting a Job (background propagation) deletes its pods.
	if err := c.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "ok", Namespace: "default"}}); err != nil {
		t.Fatal(err)
	}
	if err := cl.RunFor(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.MatchingLabels{"job-name": "ok"}); err != nil || len(pods.Items) != 0 {
		t.Fatalf("pods of the deleted job: %d %v", len(pods.Items), err)
	}
}
