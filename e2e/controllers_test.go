package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/nodekit/nodekit/simclient/examples/drain"
	"github.com/nodekit/nodekit/simclient/examples/job"
	"github.com/nodekit/nodekit/simclient/examples/replicaset"
	"github.com/nodekit/nodekit/simclient/simctrl"
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

// The Job example reconciler of the simclient module runs unchanged on a
// controller-runtime manager against the real kube-apiserver: it runs a
// Job's completions as pods, never more than its parallelism at once, and
// marks the Job Complete once every index succeeded. No scheduler or
// kubelet runs here: the test plays the node's part, binding each pod and
// writing its Running, then Succeeded, status.
func TestSimExampleJobOnTheRealAPIServer(t *testing.T) {
	c := startCluster(t)
	cs, _ := clientset(t, c.RESTConfig(), 100, 200)
	ctx, cancel := context.WithCancel(t.Context())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ctrl.SetLogger(logr.Discard()) // else it warns that none was set
	mgr, err := ctrl.NewManager(c.RESTConfig(), simctrl.ManagerOptions(scheme))
	if err != nil {
		t.Fatal(err)
	}
	if err := (&job.Reconciler{Client: mgr.GetClient(), Clock: clock.RealClock{}}).SetupWithManager(mgr, controller.Options{}); err != nil {
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
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	const completions, parallelism = 4, 2
	batch := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: "default"},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](completions), Parallelism: ptr.To[int32](parallelism),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "work", Image: "work:1"}}}},
		},
	}
	if _, err := cs.BatchV1().Jobs("default").Create(ctx, batch, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The node: a new pod is bound and Running at one poll, Succeeded at
	// the next; the Job's active pods never exceed its parallelism.
	complete := func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=batch"})
		if err != nil {
			return false, err
		}
		active := 0
		for i := range l.Items {
			p := &l.Items[i]
			switch {
			case p.Spec.NodeName == "":
				active++
				err = cs.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
					Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}, metav1.CreateOptions{})
			case p.Status.Phase == corev1.PodPending || p.Status.Phase == "":
				active++
				err = nodeWrites(ctx, cs, p, corev1.PodRunning)
			case p.Status.Phase == corev1.PodRunning:
				active++
				err = nodeWrites(ctx, cs, p, corev1.PodSucceeded)
			}
			if err != nil && !apierrors.IsConflict(err) {
				return false, err
			}
		}
		if active > parallelism {
			return false, fmt.Errorf("%d pods active, parallelism %d", active, parallelism)
		}
		j, err := cs.BatchV1().Jobs("default").Get(ctx, "batch", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range j.Status.Conditions {
			if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
				if j.Status.Succeeded != completions || len(l.Items) != completions {
					return false, fmt.Errorf("complete with %d succeeded, %d pods; want %d", j.Status.Succeeded, len(l.Items), completions)
				}
				return true, nil
			}
		}
		return false, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, complete); err != nil {
		t.Fatalf("job complete: %v", err)
	}
}

// The node-draining example controller of the simclient module runs
// unchanged against the real kube-apiserver, beside the ReplicaSet one:
// it cordons the labelled node and evicts its pods through the eviction
// subresource, which the real apiserver refuses (429) while the disruption
// budget allows no more, until the replacements run elsewhere; then it
// marks the node drained. The test plays the scheduler (binding pods to
// the first schedulable node), the kubelets (Running and Ready once bound;
// a pod being deleted goes at once, as after its containers stopped) and
// the disruption controller (the budget's status), and checks that the
// budget held throughout.
func TestSimExampleDrainOnTheRealAPIServer(t *testing.T) {
	c := startCluster(t)
	cs, _ := clientset(t, c.RESTConfig(), 100, 200)
	ctx, cancel := context.WithCancel(t.Context())
	factory := informers.NewSharedInformerFactory(cs, 0)
	rs, err := replicaset.New(cs, factory, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	dr, err := drain.New(cs, factory, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan error, 2)
	go func() { done <- rs.Run(ctx, 2) }()
	go func() { done <- dr.Run(ctx) }()
	defer func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
		factory.Shutdown()
	}()

	for _, n := range []string{"n1", "n2"} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const replicas, minAvailable = 3, 2
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(minAvailable)), Selector: selector},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](replicas), Selector: selector,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	labelled, evicted := false, false
	// One round of the parts the test plays; it reports the healthy pods
	// per node.
	round := func(ctx context.Context) (map[string]int, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		target := ""
		for _, n := range nodes.Items { // in name order
			if !n.Spec.Unschedulable {
				target = n.Name
				break
			}
		}
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return nil, err
		}
		pdb, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		healthy := map[string]int{}
		total := 0
		for i := range l.Items {
			p := &l.Items[i]
			switch {
			case p.DeletionTimestamp != nil:
				evicted = true
				err = cs.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			case p.Spec.NodeName == "" && target != "":
				err = cs.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
					Target: corev1.ObjectReference{Kind: "Node", Name: target}}, metav1.CreateOptions{})
			case p.Spec.NodeName != "" && p.Status.Phase != corev1.PodRunning:
				err = nodeWrites(ctx, cs, p, corev1.PodRunning)
			case p.Status.Phase == corev1.PodRunning:
				if _, disrupted := pdb.Status.DisruptedPods[p.Name]; !disrupted {
					healthy[p.Spec.NodeName]++
					total++
				}
			}
			if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return nil, err
			}
		}
		// The disruption controller's part: the budget's status from
		// the healthy pods, the pods the apiserver has just let go
		// (DisruptedPods) not among them until they are gone.
		st := pdb.Status.DeepCopy()
		for name := range st.DisruptedPods {
			if !slices.ContainsFunc(l.Items, func(p corev1.Pod) bool { return p.Name == name && p.DeletionTimestamp == nil }) {
				delete(st.DisruptedPods, name)
			}
		}
		st.ObservedGeneration, st.ExpectedPods = pdb.Generation, replicas
		st.CurrentHealthy, st.DesiredHealthy = int32(total), minAvailable
		st.DisruptionsAllowed = max(0, int32(total)-minAvailable)
		pdb.Status = *st
		if _, err := cs.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			return nil, err
		}
		return healthy, nil
	}
	drained := func(ctx context.Context) (bool, error) {
		healthy, err := round(ctx)
		if err != nil {
			return false, err
		}
		total := healthy["n1"] + healthy["n2"]
		if labelled && total < minAvailable {
			return false, fmt.Errorf("%d pods healthy during the drain, the budget's minimum %d", total, minAvailable)
		}
		if !labelled {
			if healthy["n1"] == replicas {
				_, err := cs.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType,
					[]byte(`{"metadata":{"labels":{"`+drain.Label+`":"true"}}}`), metav1.PatchOptions{})
				labelled = err == nil
				return false, err
			}
			return false, nil
		}
		n1, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return n1.Annotations[drain.Annotation] == "true" && n1.Spec.Unschedulable && healthy["n2"] == replicas && healthy["n1"] == 0, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 90*time.Second, true, drained); err != nil {
		t.Fatalf("n1 drained, its pods on n2 (labelled %v, a pod evicted %v): %v", labelled, evicted, err)
	}
}

// nodeWrites writes a pod's status as its kubelet would: Running and
// Ready, or Succeeded with its containers exited 0.
func nodeWrites(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, phase corev1.PodPhase) error {
	p = p.DeepCopy()
	now := metav1.Now()
	p.Status.Phase = phase
	ready := corev1.ConditionTrue
	var states []corev1.ContainerStatus
	for _, ctr := range p.Spec.Containers {
		s := corev1.ContainerStatus{Name: ctr.Name, Image: ctr.Image, ImageID: ctr.Image, ContainerID: "fake://" + string(p.UID) + "/" + ctr.Name}
		if phase == corev1.PodRunning {
			s.Ready, s.Started = true, ptr.To(true)
			s.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
		} else {
			ready = corev1.ConditionFalse
			s.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}
		}
		states = append(states, s)
	}
	p.Status.ContainerStatuses = states
	p.Status.StartTime = &now
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: now}}
	_, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}
