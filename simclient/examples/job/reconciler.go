// Package job is a controller-runtime reconciler as a controller author
// writes one, and its test on a simulated cluster: a Job controller that
// runs a Job's completions as indexed pods, parallelism at a time, and
// marks the Job Complete. Nothing in it knows of sim; the test gives the
// manager simclient's REST config and the controller a workqueue on the
// cluster's clock.
package job

import (
	"context"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// IndexLabel is the label of a pod's completion index.
const IndexLabel = "example.com/completion-index"

// Reconciler reconciles Jobs.
type Reconciler struct {
	client.Client
	// Clock stamps the Job's status. Default: the real one.
	Clock clock.PassiveClock
}

// SetupWithManager registers the reconciler: Jobs and the pods they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("job").
		For(&batchv1.Job{}).
		Owns(&corev1.Pod{}).
		WithOptions(opts).
		Complete(r)
}

// Reconcile makes one Job's pods: one per completion index not yet
// succeeded, at most parallelism running; a failed pod is deleted and
// its index run again, up to backoffLimit failures.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var job batchv1.Job
	if err := r.Get(ctx, req.NamespacedName, &job); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if finished(&job) {
		return reconcile.Result{}, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{"job-name": job.Name}); err != nil {
		return reconcile.Result{}, err
	}
	completions := int(ptr.Deref(job.Spec.Completions, 1))
	parallelism := int(ptr.Deref(job.Spec.Parallelism, 1))
	succeeded, active, failed := map[int]bool{}, 0, int(job.Status.Failed)
	present := map[int]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !metav1.IsControlledBy(p, &job) {
			continue
		}
		idx, err := strconv.Atoi(p.Labels[IndexLabel])
		if err != nil {
			continue
		}
		present[idx] = true
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			succeeded[idx] = true
		case p.Status.Phase == corev1.PodFailed:
			if p.DeletionTimestamp == nil {
				// Counted by the deletion that succeeds: a cache behind
				// may show the pod once more.
				err := r.Delete(ctx, p, client.Preconditions{UID: &p.UID})
				switch {
				case err == nil:
					failed++
				case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
					return reconcile.Result{}, err
				}
			}
		case p.DeletionTimestamp == nil:
			active++
		}
	}
	st := job.Status.DeepCopy()
	st.Active, st.Succeeded, st.Failed = int32(active), int32(len(succeeded)), int32(failed)
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	now := metav1.NewTime(clk.Now())
	switch {
	case len(succeeded) >= completions:
		st.Conditions = append(st.Conditions,
			batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now})
		st.CompletionTime = &now
	case failed > int(ptr.Deref(job.Spec.BackoffLimit, 6)):
		st.Conditions = append(st.Conditions,
			batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: batchv1.JobReasonBackoffLimitExceeded},
			batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: batchv1.JobReasonBackoffLimitExceeded})
	default:
		for idx := 0; idx < completions && active < parallelism; idx++ {
			if present[idx] {
				continue
			}
			if err := r.createPod(ctx, &job, idx); err != nil {
				return reconcile.Result{}, err
			}
			active++
			st.Active++
		}
	}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	job.Status = *st
	return reconcile.Result{}, r.Status().Update(ctx, &job)
}

// createPod creates the pod of a completion index, named after it so
// that a second create of it (from a cache behind its writes) fails as
// AlreadyExists.
func (r *Reconciler) createPod(ctx context.Context, job *batchv1.Job, idx int) error {
	tmpl := job.Spec.Template
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s-%d", job.Name, idx),
			Namespace:   job.Namespace,
			Labels:      map[string]string{"job-name": job.Name, IndexLabel: strconv.Itoa(idx)},
			Annotations: tmpl.Annotations,
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	for k, v := range tmpl.Labels {
		pod.Labels[k] = v
	}
	if err := controllerutil.SetControllerReference(job, pod, r.Scheme()); err != nil {
		return err
	}
	if err := r.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func finished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
