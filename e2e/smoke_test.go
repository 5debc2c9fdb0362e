package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClusterServesPods(t *testing.T) {
	c := startCluster(t)
	cs, requests := clientset(t, c.RESTConfig(), 100, 200)
	ctx := t.Context()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default", Labels: map[string]string{"app": "smoke"}},
		Spec: corev1.PodSpec{
			NodeName:   "n1",
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		},
	}
	created, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.UID == "" || created.ResourceVersion == "" {
		t.Fatalf("created pod has no UID or resourceVersion: %+v", created.ObjectMeta)
	}
	got, err := cs.CoreV1().Pods("default").Get(ctx, "smoke", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.UID != created.UID || got.Spec.NodeName != "n1" || got.Labels["app"] != "smoke" {
		t.Fatalf("got back %s node=%q labels=%v, want uid %s on n1 with app=smoke", got.UID, got.Spec.NodeName, got.Labels, created.UID)
	}
	// Defaulting and admission ran: a real apiserver, not a stub.
	if got.Spec.RestartPolicy != corev1.RestartPolicyAlways || got.Status.Phase != corev1.PodPending {
		t.Fatalf("pod not defaulted: restartPolicy=%q phase=%q", got.Spec.RestartPolicy, got.Status.Phase)
	}
	// A pod bound to a node is deleted gracefully: it stays, marked, until
	// the node's agent confirms with grace period 0.
	if err := cs.CoreV1().Pods("default").Delete(ctx, "smoke", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	got, err = cs.CoreV1().Pods("default").Get(ctx, "smoke", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("after graceful delete: err=%v deletionTimestamp=%v, want the pod marked", err, got.DeletionTimestamp)
	}
	zero := int64(0)
	if err := cs.CoreV1().Pods("default").Delete(ctx, "smoke", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("final delete: %v", err)
	}
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "smoke", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after final delete: %v, want NotFound", err)
	}
	if requests.Load() < 6 {
		t.Fatalf("request counter saw %d requests, want at least 6", requests.Load())
	}
}
