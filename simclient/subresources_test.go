package simclient_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/sim"
	"github.com/nodekit/nodekit/simclient"
)

// Evictions go through the pods' disruption budget: with two Ready pods
// and minAvailable 1, the first is evicted and the second refused (429)
// until the first's replacement would be Ready.
func TestEvictionHonoursDisruptionBudgets(t *testing.T) {
	ctx := context.Background()
	cl, _, cs := newServer(t, 1, "n1")
	for _, name := range []string{"a", "b"} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, testPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.RunFor(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	evict := func(name string) error {
		return cs.PolicyV1().Evictions("default").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	}
	if err := evict("a"); err != nil {
		t.Fatalf("first eviction: %v", err)
	}
	if err := evict("b"); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second eviction: %v, want 429", err)
	}
	p, err := cs.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("evicted pod not terminating: %v", err)
	}
}

// Without the cluster's scheduler, a scheduler under test binds pods
// through the binding subresource; a bound pod cannot be bound again.
func TestBindingBindsAPod(t *testing.T) {
	ctx := context.Background()
	cl, err := sim.New(sim.Config{NoScheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	srv, err := simclient.New(cl, simclient.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if _, err := cl.AddNode("n1"); err != nil {
		t.Fatal(err)
	}
	cs, _ := srv.Clientset()
	if _, err := cs.CoreV1().Pods("default").Create(ctx, testPod("a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.RunFor(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if p, _ := cs.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{}); p.Spec.NodeName != "" {
		t.Fatalf("bound without a scheduler: %q", p.Spec.NodeName)
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	if err := cs.CoreV1().Pods("default").Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods("default").Bind(ctx, b, metav1.CreateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("second binding: %v, want a conflict", err)
	}
	if err := cl.RunFor(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p, _ := cs.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{})
	if p.Spec.NodeName != "n1" || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("pod on %q %s", p.Spec.NodeName, p.Status.Phase)
	}
}
