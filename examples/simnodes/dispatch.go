package main

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/podconfig"
)

// byNode indexes the pod informer's cache by spec.nodeName.
const byNode = "node"

func nodeIndex(obj any) ([]string, error) {
	if p, ok := obj.(*v1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}

// dispatcher hands the events of the process's one pod informer to the
// nodes they are bound to, as each node's apiserver source would have
// seen them on a watch of its own: a SET of its pods first, then ADD,
// UPDATE and REMOVE. Each node has a feeder with a queue of its own, so
// a node slow to take its updates holds up no other.
type dispatcher struct {
	indexer cache.Indexer
	feeders map[string]*feeder // by node name; fixed after newDispatcher
}

func newDispatcher(indexer cache.Indexer, outs map[string]chan<- podconfig.PodUpdate) *dispatcher {
	d := &dispatcher{indexer: indexer, feeders: make(map[string]*feeder, len(outs))}
	for name, out := range outs {
		d.feeders[name] = &feeder{out: out, wake: make(chan struct{}, 1)}
	}
	return d
}

// handler is the informer's event handler. Events of a node not started
// yet are dropped: start reads them from the cache, which the informer
// updates before it tells the handler.
func (d *dispatcher) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.push(podconfig.ADD, obj) },
		UpdateFunc: func(_, obj any) { d.push(podconfig.UPDATE, obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			d.push(podconfig.REMOVE, obj)
		},
	}
}

func (d *dispatcher) push(op podconfig.PodOperation, obj any) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if f := d.feeders[p.Spec.NodeName]; f != nil {
		// The agent's pod config marks pods with their source: each gets
		// a copy, not the informer's object.
		f.push(podconfig.PodUpdate{Op: op, Pods: []*v1.Pod{p.DeepCopy()}})
	}
}

// start sends node its pods in the cache as a SET and lets its events
// through from then on; the informer has synced. The cache is read under
// the feeder's lock: an event dropped before then is in it, one after is
// queued behind the SET (twice, at worst, which the pod config ignores).
func (d *dispatcher) start(node string) {
	f := d.feeders[node]
	if f == nil {
		return
	}
	f.mu.Lock()
	objs, _ := d.indexer.ByIndex(byNode, node) // the index exists
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			pods = append(pods, p.DeepCopy())
		}
	}
	f.started, f.queue = true, []podconfig.PodUpdate{{Op: podconfig.SET, Pods: pods}}
	f.mu.Unlock()
	f.signal()
}

// run feeds every node its updates until ctx ends.
func (d *dispatcher) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, f := range d.feeders {
		wg.Go(func() { f.run(ctx) })
	}
	wg.Wait()
}

type feeder struct {
	out  chan<- podconfig.PodUpdate
	wake chan struct{}

	mu      sync.Mutex
	started bool
	queue   []podconfig.PodUpdate
}

// push queues u once the feeder has started.
func (f *feeder) push(u podconfig.PodUpdate) {
	f.mu.Lock()
	if !f.started {
		f.mu.Unlock()
		return
	}
	f.queue = append(f.queue, u)
	f.mu.Unlock()
	f.signal()
}

func (f *feeder) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *feeder) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
		f.mu.Lock()
		q := f.queue
		f.queue = nil
		f.mu.Unlock()
		for _, u := range q {
			select {
			case f.out <- u:
			case <-ctx.Done():
				return
			}
		}
	}
}
