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
// a node slow to take its updates holds up no other. A feeder's goroutine
// runs only while its queue has updates: a standing one per node waited
// almost always (1,000 goroutines and their stacks in a process of 1,000
// nodes).
type dispatcher struct {
	ctx     context.Context
	indexer cache.Indexer
	feeders map[string]*feeder // by node name; fixed after newDispatcher

	mu      sync.Mutex // guards stopped against wg's Go and Wait
	stopped bool
	wg      sync.WaitGroup
}

// newDispatcher feeds the nodes of outs until ctx ends; run waits for
// its goroutines.
func newDispatcher(ctx context.Context, indexer cache.Indexer, outs map[string]chan<- podconfig.PodUpdate) *dispatcher {
	d := &dispatcher{ctx: ctx, indexer: indexer, feeders: make(map[string]*feeder, len(outs))}
	for name, out := range outs {
		d.feeders[name] = &feeder{d: d, out: out}
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
	f.spawnLocked()
	f.mu.Unlock()
}

// run returns once ctx has ended and every feeder's goroutine with it.
func (d *dispatcher) run() {
	<-d.ctx.Done()
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
	d.wg.Wait()
}

type feeder struct {
	d   *dispatcher
	out chan<- podconfig.PodUpdate

	mu      sync.Mutex
	started bool
	running bool // its goroutine runs
	queue   []podconfig.PodUpdate
}

// push queues u once the feeder has started.
func (f *feeder) push(u podconfig.PodUpdate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started {
		return
	}
	f.queue = append(f.queue, u)
	f.spawnLocked()
}

// spawnLocked starts the feeder's goroutine unless it runs or the
// dispatcher has stopped. Callers hold f.mu.
func (f *feeder) spawnLocked() {
	if f.running {
		return
	}
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	f.running = true
	d.wg.Go(f.feed)
}

// feed sends the queue's updates in order until it is empty or the
// dispatcher's ctx ends.
func (f *feeder) feed() {
	for {
		f.mu.Lock()
		q := f.queue
		f.queue = nil
		if len(q) == 0 {
			f.running = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		for _, u := range q {
			select {
			case f.out <- u:
			case <-f.d.ctx.Done():
				return // running stays true: nothing starts another
			}
		}
	}
}
