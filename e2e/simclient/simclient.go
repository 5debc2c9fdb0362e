// Package simclient is the recipe for driving a sim.Cluster through
// client-go: Reactors routes a fake clientset's pod and Node calls to the
// cluster's store, so a controller written against kubernetes.Interface
// reads and writes the very pods the simulated nodes run, with the
// store's resourceVersions, watches and graceful deletion.
//
//	cl, _ := sim.New(sim.Config{})
//	cs := fake.NewClientset()
//	simclient.Reactors(cs, cl.Store())
//	ctrl := mycontroller.New(cs)         // the code under test
//	cl.RunFor(ctx, time.Hour)
//
// It lives in the e2e module because the library does not import
// client-go. The simclient module (github.com/nodekit/nodekit/simclient)
// supersedes it for controller tests: client-go's real clientset,
// informers with watch-list and controller-runtime on every kind. Only pods (get, list, watch, create, update, delete, status
// patch) and Nodes (get, list, create, update, status update) go to the
// store; other resources stay in the fake clientset's own tracker.
package simclient

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/sim"
)

// Reactors makes cs serve pods and Nodes from store.
func Reactors(cs *fake.Clientset, store *sim.Store) {
	ctx := context.Background()
	cs.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		wa := a.(k8stesting.WatchActionImpl)
		r := wa.GetWatchRestrictions()
		w, err := store.Pods(a.GetNamespace()).Watch(ctx, metav1.ListOptions{
			LabelSelector: r.Labels.String(), FieldSelector: r.Fields.String(), ResourceVersion: r.ResourceVersion})
		return true, w, err
	})
	cs.PrependReactor("*", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pods := store.Pods(a.GetNamespace())
		switch a := a.(type) {
		case k8stesting.ListAction:
			r := a.GetListRestrictions()
			l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: r.Labels.String(), FieldSelector: r.Fields.String()})
			return true, l, err
		case k8stesting.CreateAction:
			p, err := pods.Create(ctx, a.GetObject().(*corev1.Pod), metav1.CreateOptions{})
			return true, p, err
		case k8stesting.UpdateAction:
			if a.GetSubresource() != "" {
				return true, nil, fmt.Errorf("simclient: update of pods/%s not supported", a.GetSubresource())
			}
			p, err := pods.Update(ctx, a.GetObject().(*corev1.Pod), metav1.UpdateOptions{})
			return true, p, err
		case k8stesting.DeleteAction:
			return true, nil, pods.Delete(ctx, a.GetName(), a.GetDeleteOptions())
		case k8stesting.PatchAction:
			var sub []string
			if a.GetSubresource() != "" {
				sub = []string{a.GetSubresource()}
			}
			p, err := pods.Patch(ctx, a.GetName(), a.GetPatchType(), a.GetPatch(), metav1.PatchOptions{}, sub...)
			return true, p, err
		case k8stesting.GetAction: // after Delete and Patch, which have GetName too
			p, err := pods.Get(ctx, a.GetName(), metav1.GetOptions{})
			return true, p, err
		}
		return true, nil, fmt.Errorf("simclient: %s of pods not supported", a.GetVerb())
	})
	cs.PrependReactor("*", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		nodes := store.Nodes()
		switch a := a.(type) {
		case k8stesting.ListAction:
			l, err := nodes.List(ctx, metav1.ListOptions{})
			return true, l, err
		case k8stesting.CreateAction:
			n, err := nodes.Create(ctx, a.GetObject().(*corev1.Node), metav1.CreateOptions{})
			return true, n, err
		case k8stesting.UpdateAction:
			if a.GetSubresource() == "status" {
				n, err := nodes.UpdateStatus(ctx, a.GetObject().(*corev1.Node), metav1.UpdateOptions{})
				return true, n, err
			}
			n, err := nodes.Update(ctx, a.GetObject().(*corev1.Node), metav1.UpdateOptions{})
			return true, n, err
		case k8stesting.GetAction:
			n, err := nodes.Get(ctx, a.GetName(), metav1.GetOptions{})
			return true, n, err
		}
		return true, nil, fmt.Errorf("simclient: %s of nodes not supported", a.GetVerb())
	})
}
