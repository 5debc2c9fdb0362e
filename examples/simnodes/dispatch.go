package main

import (
	"context"
	"maps"
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

// sendFunc hands a node's agent an update and returns once it has taken
// it (agent.Agent's Send for the apiserver source: merged in the feeder's
// goroutine, without a forwarder of the agent's per node), or ctx's error.
type sendFunc func(ctx context.Context, u podconfig.PodUpdate) error

// newDispatcher feeds the nodes of outs until ctx ends; run waits for
// its goroutines.
func newDispatcher(ctx context.Context, indexer cache.Indexer, outs map[string]sendFunc) *dispatcher {
	d := &dispatcher{ctx: ctx, indexer: indexer, feeders: make(map[string]*feeder, len(outs))}
	for name, send := range outs {
		d.feeders[name] = &feeder{d: d, send: send}
	}
	return d
}

// forAgent is what a node's agent gets of an informer's pod: a Pod and
// annotations of its own (its pod config marks the pod's source there),
// the rest shared with the informer's cache. The cache replaces an
// object on update and never changes one, and the agent keeps its pods
// read-only (podconfig's contract), so sharing is safe; a deep copy held
// every pod's spec and status twice (9.5 MB of 1,000 nodes' live heap in
// a rollout of 2,000 pods).
func forAgent(p *v1.Pod) *v1.Pod {
	cp := *p
	cp.Annotations = maps.Clone(p.Annotations)
	return &cp
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
		f.push(podconfig.PodUpdate{Op: op, Pods: []*v1.Pod{forAgent(p)}})
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
			pods = append(pods, forAgent(p))
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
	d    *dispatcher
	send sendFunc

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
			if f.send(f.d.ctx, u) != nil {
				return // ctx ended (or the agent): running stays true, nothing starts another
			}
		}
	}
}
