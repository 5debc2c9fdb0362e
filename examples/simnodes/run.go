package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/examples/internal/exlog"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/sim"
	"github.com/nodekit/nodekit/status"
)

// nodesPerEventSink is how many nodes share an event broadcaster.
const nodesPerEventSink = 16

// kubeletVersion is what the Nodes report as nodeInfo.kubeletVersion.
const kubeletVersion = "v1.37.0-nodekit-sim"

// run is the program: it parses args, starts the shard's nodes and runs
// them until ctx ends (or -duration passes).
func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.processes > 1 {
		return runProcesses(ctx, args, o.processes, stderr)
	}
	log := exlog.New(stderr, o.verbosity)
	if o.gcPercent > 0 {
		debug.SetGCPercent(o.gcPercent)
	}
	if o.memLimitMiB > 0 {
		debug.SetMemoryLimit(int64(o.memLimitMiB) << 20)
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	if o.pprofAddr != "" {
		ctx, cancel := context.WithCancel(ctx)
		done, err := servePprof(ctx, o.pprofAddr, log)
		if err != nil {
			cancel()
			return fmt.Errorf("-pprof-addr: %w", err)
		}
		defer func() { cancel(); <-done }()
	}
	cs, hb, err := clients(o)
	if err != nil {
		return err
	}
	return runShard(ctx, o, cs, hb, log)
}

// clients loads the kubeconfig and checks that it reaches an apiserver.
// It returns two clients: cs for pods, events and the informers, and hb
// for the nodes' heartbeats (Leases and Node status), each with its own
// rate limit and bound on requests in flight. A kubelet's heartbeat has a
// connection of its own; sharing one budget, a rollout's status patches
// and events (some 5 requests a pod) delayed 1,000 nodes' Lease renewals
// past their 40s, and the node lifecycle controller marked them NotReady.
func clients(o *options) (cs, hb *clientset, err error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("-kubeconfig %s: %w", o.kubeconfig, err)
	}
	cfg.UserAgent = fmt.Sprintf("nodekit-simnodes/shard-%d-of-%d", o.shard, o.total)
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	probe := rest.CopyConfig(cfg)
	probe.Timeout = 10 * time.Second
	pcs, err := newClients(probe, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("-kubeconfig %s: %w", o.kubeconfig, err)
	}
	if err := pcs.serverVersion(context.Background()); err != nil {
		return nil, nil, fmt.Errorf("-kubeconfig %s: no apiserver answers at %s: %w", o.kubeconfig, cfg.Host, err)
	}
	if cs, err = newClients(cfg, o.maxInFlight); err != nil {
		return nil, nil, err
	}
	if hb, err = newClients(cfg, o.maxInFlight); err != nil {
		return nil, nil, err
	}
	return cs, hb, nil
}

// simNode is one node of the shard.
type simNode struct {
	name    string
	podCIDR netip.Prefix // invalid: none
	agent   *agent.Agent
}

// runShard runs the shard's nodes on cs, their heartbeats on hb, until ctx
// ends.
func runShard(ctx context.Context, o *options, cs, hb *clientset, log logr.Logger) error {
	began := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: every goroutine ends with ctx

	// One informer of every bound pod and one of the Nodes, for all the
	// shard's nodes. managedFields are dropped: nothing here reads them.
	bound := func(lo *metav1.ListOptions) { lo.FieldSelector = "spec.nodeName!=" }
	podInf := cache.NewSharedIndexInformer(listWatch(cs.Pods("").List, cs.Pods("").Watch, bound),
		&v1.Pod{}, 0, cache.Indexers{byNode: nodeIndex})
	nodeInf := cache.NewSharedIndexInformer(listWatch(cs.Nodes().List, cs.Nodes().Watch, func(*metav1.ListOptions) {}),
		&v1.Node{}, 0, cache.Indexers{})
	// The Node informer's transform also shares each node controller's
	// Node (the answer of its last status update) when the watch brings
	// that version (cachedNodes.share).
	nodeClient := &cachedNodes{api: hb.Nodes(), lister: listerscorev1.NewNodeLister(nodeInf.GetIndexer()), sent: map[string]*v1.Node{}}
	if err := podInf.SetTransform(dropManagedFields); err != nil {
		return err
	}
	if err := nodeInf.SetTransform(nodeClient.share); err != nil {
		return err
	}

	// Events: a broadcaster per nodesPerEventSink nodes. A broadcaster
	// posts its events one at a time, so one for a thousand nodes falls
	// behind a rollout by minutes; each kubelet has its own.
	var rec func(k int, node string) record.EventRecorder
	if o.events {
		var sinks []record.EventBroadcaster
		defer func() {
			for _, b := range sinks {
				b.Shutdown()
			}
		}()
		rec = func(k int, node string) record.EventRecorder {
			if k%nodesPerEventSink == 0 {
				b := record.NewBroadcaster(record.WithContext(ctx))
				b.StartRecordingToSink(eventSink{c: cs, ctx: ctx})
				sinks = append(sinks, b)
			}
			return sinks[len(sinks)-1].NewRecorder(cs.scheme, v1.EventSource{Component: "kubelet", Host: node})
		}
	}

	from, to := shardRange(o.nodes, o.shard, o.total)
	sn := make([]*simNode, 0, to-from)
	outs := make(map[string]sendFunc, to-from)
	leases := hb.Leases(v1.NamespaceNodeLease)
	clk := clock.RealClock{}
	for k := from; k < to; k++ {
		n, err := newSimNode(o, k-from, k, cs, nodeClient, leases, rec, clk, log)
		if err != nil {
			return err
		}
		sn = append(sn, n)
		outs[n.name] = func(ctx context.Context, u podconfig.PodUpdate) error {
			return n.agent.Send(ctx, podutil.ApiserverSource, u)
		}
	}
	d := newDispatcher(ctx, podInf.GetIndexer(), outs)
	if _, err := podInf.AddEventHandler(d.handler()); err != nil {
		return err
	}
	for _, inf := range []cache.SharedIndexInformer{podInf, nodeInf} {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	wg.Go(d.run)
	log.Info("Starting nodes", "shard", fmt.Sprintf("%d/%d", o.shard, o.total), "nodes", len(sn),
		"first", sn[0].name, "last", sn[len(sn)-1].name)
	for _, n := range sn {
		wg.Go(func() {
			if err := n.agent.Run(ctx); err != nil {
				log.Error(err, "Agent stopped", "node", n.name)
			}
		})
	}
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, nodeInf.HasSynced) {
		return nil // ctx ended
	}
	for _, n := range sn {
		d.start(n.name)
	}
	// Milestone for a script: every node of the shard registered.
	var registered atomic.Int64
	for _, n := range sn {
		wg.Go(func() {
			select {
			case <-n.agent.Node().Registered():
			case <-ctx.Done():
				return
			}
			if n.podCIDR.IsValid() {
				setPodCIDR(ctx, cs, n, log)
			}
			if registered.Add(1) == int64(len(sn)) {
				log.Info("All nodes registered", "nodes", len(sn), "after", time.Since(began).Round(time.Millisecond))
			}
		})
	}
	<-ctx.Done()
	log.Info("Stopping", "nodes", len(sn))
	return nil
}

// newSimNode builds node k's agent on a runtime of its own; it is the
// i-th of its shard.
func newSimNode(o *options, i, k int, cs *clientset, nodeClient node.NodeClient, leases node.LeaseClient,
	rec func(i int, node string) record.EventRecorder, clk agent.Clock, log logr.Logger) (*simNode, error) {
	name := nodeName(o.prefix, k, o.nodes)
	n := &simNode{name: name}
	nlog := log.WithName(name)
	// No call list: nobody reads it, and a full one is 560 KiB a node.
	rc := fake.Config{Clock: clk, PodBehavior: sim.AnnotationBehavior, Log: nlog.WithName("fake").V(2), MaxRecordedCalls: -1}
	if o.podCIDR.IsValid() {
		n.podCIDR = nthBlock(o.podCIDR, o.nodeCIDRSize, k)
		rc.PodCIDR = n.podCIDR.String()
	}
	ac := agent.Config{
		NodeName: name,
		Sources:  []string{podutil.ApiserverSource},
		StatusClient: func(ns string) status.PodClient {
			return cs.Pods(ns)
		},
		NodeIPs: []string{nthHost(o.nodeIPCIDR, k).String()},
		Node: &node.Config{
			Nodes:          nodeClient,
			Leases:         leases,
			Labels:         o.labels,
			Capacity:       o.capacity,
			MaxPods:        o.maxPods,
			KubeletVersion: kubeletVersion,
			KubeletPort:    node.NoKubeletPort,
		},
		MaxPods:           o.maxPods,
		PLEGEventCapacity: o.plegEvents,
		FirstStatusDelay:  o.firstStatus,
		Clock:             clk,
		Log:               nlog.V(1),
	}
	if rec != nil {
		r := rec(i, name)
		rc.Recorder, ac.Recorder = r, r
	}
	rt, err := fake.New(rc)
	if err != nil {
		return nil, err
	}
	ac.Runtime = rt
	if n.agent, err = agent.New(ac); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	return n, nil
}

// setPodCIDR sets the registered Node's spec.podCIDR(s), which the
// kubelet leaves to kube-controller-manager's node IPAM (or kubeadm):
// here the range is the node's by its number. A Node that has one keeps
// it.
func setPodCIDR(ctx context.Context, cs *clientset, n *simNode, log logr.Logger) {
	if cur := n.agent.Node().Node(); cur != nil && cur.Spec.PodCIDR != "" {
		return
	}
	cidr := n.podCIDR.String()
	patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, cidr, cidr)
	if _, err := cs.Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
		log.Error(err, "Setting the pod CIDR failed", "node", n.name, "podCIDR", cidr)
	}
}

// cachedNodes is the Nodes client the node controllers get: a read from
// the apiserver's cache (resourceVersion "0", each controller's read
// before a status computation when its Node is not fresh) is answered
// from the process's Node informer instead, which is as current. It is
// not a node.NodeWatcher on purpose: a watch per node is what the shared
// informer replaces.
type cachedNodes struct {
	api    *nodeClient
	lister listerscorev1.NodeLister

	mu sync.Mutex
	// sent is each node's last status update's answer, which its
	// controller holds, until the informer's watch brings that version.
	sent map[string]*v1.Node
}

var _ node.NodeClient = (*cachedNodes)(nil)

func (c *cachedNodes) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error) {
	if opts.ResourceVersion == "0" {
		// The informer's object itself: the node controller keeps the
		// Nodes it reads read-only (it copies one to change it), and the
		// informer replaces an object rather than changing it. A copy
		// held each Node twice (4 MB of 1,000 nodes' live heap).
		if n, err := c.lister.Get(name); err == nil {
			return n, nil
		}
	}
	return c.api.Get(ctx, name, opts)
}

func (c *cachedNodes) Create(ctx context.Context, n *v1.Node, opts metav1.CreateOptions) (*v1.Node, error) {
	return c.api.Create(ctx, n, opts)
}

func (c *cachedNodes) Update(ctx context.Context, n *v1.Node, opts metav1.UpdateOptions) (*v1.Node, error) {
	return c.api.Update(ctx, n, opts)
}

func (c *cachedNodes) UpdateStatus(ctx context.Context, n *v1.Node, opts metav1.UpdateOptions) (*v1.Node, error) {
	got, err := c.api.UpdateStatus(ctx, n, opts)
	if err == nil && got != nil {
		got.ManagedFields = nil // nothing here reads them
		c.mu.Lock()
		c.sent[got.Name] = got
		c.mu.Unlock()
	}
	return got, err
}

// share is the Node informer's transform: a Node of the version a node
// controller holds (its last status update's answer) is stored as that
// very object, not as the watch's decoded copy, so each Node is held
// once rather than twice (a few KiB a node: conditions, images, node
// info). Both keep their Nodes read-only (node.NodeClient's doc; the
// informer replaces an object, never changes it). Other Nodes lose their
// managedFields.
func (c *cachedNodes) share(obj any) (any, error) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return dropManagedFields(obj)
	}
	c.mu.Lock()
	held := c.sent[n.Name]
	switch {
	case held == nil:
	case held.ResourceVersion == n.ResourceVersion:
		delete(c.sent, n.Name) // the informer holds it from now on
		c.mu.Unlock()
		return held, nil
	case newerRV(n.ResourceVersion, held.ResourceVersion):
		delete(c.sent, n.Name) // that version will not come
	}
	c.mu.Unlock()
	n.ManagedFields = nil
	return n, nil
}

// newerRV reports whether resource version a is later than b; the
// apiserver's are etcd revisions (unparsable ones: not later).
func newerRV(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}

func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
