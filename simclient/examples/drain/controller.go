// Package drain is a client-go node-draining controller: a Node labelled
// example.com/drain=true is cordoned and its pods evicted through the
// eviction subresource (which PodDisruptionBudgets may refuse: then it
// tries again 5 s later), then annotated example.com/drained. Nothing in
// it knows of sim.
package drain

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Label asks for a Node's drain; Annotation says it is done.
const (
	Label      = "example.com/drain"
	Annotation = "example.com/drained"
)

// Controller drains Nodes.
type Controller struct {
	client kubernetes.Interface
	nodes  corelisters.NodeLister
	pods   corelisters.PodLister
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// New builds the controller on factory's informers, its workqueue on clk.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, clk clock.WithTicker) (*Controller, error) {
	ni, pi := factory.Core().V1().Nodes(), factory.Core().V1().Pods()
	c := &Controller{
		client: client, nodes: ni.Lister(), pods: pi.Lister(),
		synced: []cache.InformerSynced{ni.Informer().HasSynced, pi.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "drain", Clock: clk}),
	}
	node := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && n.Labels[Label] == "true" {
			c.queue.Add(n.Name)
		}
	}
	if _, err := ni.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: node, UpdateFunc: func(_, o any) { node(o) }}); err != nil {
		return nil, err
	}
	pod := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			if n, err := c.nodes.Get(p.Spec.NodeName); err == nil && n.Labels[Label] == "true" {
				c.queue.Add(n.Name)
			}
		}
	}
	if _, err := pi.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: pod, UpdateFunc: func(_, o any) { pod(o) }, DeleteFunc: pod}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run works the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("drain: caches not synced")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			name, quit := c.queue.Get()
			if quit {
				return
			}
			retry, err := c.sync(ctx, name)
			switch {
			case err != nil:
				c.queue.AddRateLimited(name)
			case retry:
				c.queue.AddAfter(name, 5*time.Second)
			default:
				c.queue.Forget(name)
			}
			c.queue.Done(name)
		}
	}()
	<-ctx.Done()
	c.queue.ShutDown()
	<-done
	return nil
}

// sync cordons a Node and evicts its pods; retry asks to come back.
func (c *Controller) sync(ctx context.Context, name string) (retry bool, err error) {
	n, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) || (err == nil && n.Labels[Label] != "true") {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !n.Spec.Unschedulable {
		if _, err := c.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType,
			[]byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
			return false, err
		}
	}
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return false, err
	}
	// In name order: which pod a disruption budget lets go first must not
	// depend on the lister's map.
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	left := 0
	for _, p := range pods {
		if p.Spec.NodeName != name || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		left++
		if p.DeletionTimestamp != nil {
			continue
		}
		err := c.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
		switch {
		case apierrors.IsTooManyRequests(err):
			retry = true // a disruption budget: later
		case err != nil && !apierrors.IsNotFound(err):
			return false, err
		}
	}
	if left > 0 || n.Annotations[Annotation] == "true" {
		return retry, nil
	}
	_, err = c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+Annotation+`":"true"}}}`), metav1.PatchOptions{})
	return false, err
}
