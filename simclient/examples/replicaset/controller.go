// Package replicaset is a client-go controller as a controller author
// writes one, and its test on a simulated cluster: a ReplicaSet
// controller with shared informers, listers and a rate-limited workqueue.
// Nothing in it knows of sim; the test gives it simclient's clientset and
// the cluster's clock.
package replicaset

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Controller keeps each ReplicaSet's count of live pods at spec.replicas
// and reports status.replicas and status.readyReplicas.
type Controller struct {
	client kubernetes.Interface
	rsets  appslisters.ReplicaSetLister
	pods   corelisters.PodLister
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]

	// adds counts each ReplicaSet's creations not seen by the pod
	// informer yet, dels the pods it deleted whose deletion was not seen;
	// a ReplicaSet waits for them, as with upstream's expectations, so
	// that it never acts on a cache that lags its own writes.
	mu   sync.Mutex
	adds map[string]int
	dels map[string]map[string]bool
}

// New builds the controller on factory's informers. clk is the
// workqueue's clock (the real one in a cluster, the simulated one in a
// test); the rate limiter is per item only, as client-go's default one
// also has a token bucket on the wall clock.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, clk clock.WithTicker) (*Controller, error) {
	rsInformer := factory.Apps().V1().ReplicaSets()
	podInformer := factory.Core().V1().Pods()
	c := &Controller{
		client: client,
		rsets:  rsInformer.Lister(),
		pods:   podInformer.Lister(),
		synced: []cache.InformerSynced{rsInformer.Informer().HasSynced, podInformer.Informer().HasSynced},
		adds:   map[string]int{},
		dels:   map[string]map[string]bool{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "replicaset", Clock: clk}),
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := rsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue,
	}); err != nil {
		return nil, err
	}
	// owner queues a pod's ReplicaSet and notes the creation or
	// deletion seen.
	owner := func(obj any, added, deleted bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "ReplicaSet" {
			key := p.Namespace + "/" + ref.Name
			c.observed(key, p.Name, added, deleted)
			c.queue.Add(key)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { owner(o, true, false) },
		UpdateFunc: func(old, o any) {
			owner(o, false, old.(*corev1.Pod).DeletionTimestamp == nil && o.(*corev1.Pod).DeletionTimestamp != nil)
		},
		DeleteFunc: func(o any) { owner(o, false, true) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run works the queue with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("replicaset: caches not synced")
	}
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for c.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	for range workers {
		<-done
	}
	return nil
}

func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync makes one ReplicaSet's pods match it.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	rs, err := c.rsets.ReplicaSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return nil // its pods go with it: the garbage collector deletes them
	}
	if c.pending(key) {
		return nil // the pod events still to come queue it again
	}
	if err != nil {
		return err
	}
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return nil
	}
	all, err := c.pods.Pods(ns).List(sel)
	if err != nil {
		return err
	}
	var live []*corev1.Pod
	ready := 0
	for _, p := range all {
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.UID != rs.UID || p.DeletionTimestamp != nil ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		live = append(live, p)
		if isReady(p) {
			ready++
		}
	}
	want := 1
	if rs.Spec.Replicas != nil {
		want = int(*rs.Spec.Replicas)
	}
	if d := want - len(live); d > 0 {
		c.expectAdds(key, d)
	}
	for i := len(live); i < want; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				GenerateName:    rs.Name + "-",
				Namespace:       ns,
				Labels:          labels.Set(rs.Spec.Template.Labels),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))},
			},
			Spec: *rs.Spec.Template.Spec.DeepCopy(),
		}
		if _, err := c.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			c.forget(key)
			return err
		}
	}
	if extra := len(live) - want; extra > 0 {
		// The newest first, by name when created in the same second.
		slices.SortFunc(live, func(a, b *corev1.Pod) int {
			if d := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); d != 0 {
				return d
			}
			return -compareStrings(a.Name, b.Name)
		})
		for _, p := range live[:extra] {
			c.expectDel(key, p.Name)
			if err := c.client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				c.forget(key)
				if !apierrors.IsNotFound(err) {
					return err
				}
			}
		}
	}
	if rs.Status.Replicas == int32(len(live)) && rs.Status.ReadyReplicas == int32(ready) && rs.Status.ObservedGeneration == rs.Generation {
		return nil
	}
	st := rs.DeepCopy()
	st.Status.Replicas, st.Status.ReadyReplicas, st.Status.ObservedGeneration = int32(len(live)), int32(ready), rs.Generation
	_, err = c.client.AppsV1().ReplicaSets(ns).UpdateStatus(ctx, st, metav1.UpdateOptions{})
	return err
}

func (c *Controller) expectAdds(key string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.adds[key] = n
}

func (c *Controller) expectDel(key, pod string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dels[key] == nil {
		c.dels[key] = map[string]bool{}
	}
	c.dels[key][pod] = true
}

func (c *Controller) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.adds, key)
	delete(c.dels, key)
}

func (c *Controller) observed(key, pod string, added, deleted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if added && c.adds[key] > 0 {
		c.adds[key]--
	}
	if deleted {
		delete(c.dels[key], pod)
	}
}

func (c *Controller) pending(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.adds[key] > 0 || len(c.dels[key]) > 0
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
