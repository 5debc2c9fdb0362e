package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/stats"
	"github.com/nodekit/nodekit/status"
)

// Errors of the Cluster's methods.
var (
	// ErrInvalidConfig is wrapped by New for an unusable Config.
	ErrInvalidConfig = errors.New("sim: invalid config")
	// ErrNodeExists: AddNode of a name already added.
	ErrNodeExists = errors.New("sim: node exists")
	// ErrClosed: the Cluster was closed.
	ErrClosed = errors.New("sim: cluster closed")
	// ErrNotIdle: RunFor gave up waiting for the process to go idle
	// (Config.IdleTimeout): something runs without end, or on real time.
	ErrNotIdle = errors.New("sim: cluster does not go idle")
	// ErrRealClock: RunFor cannot step a clock the cluster does not own.
	ErrRealClock = errors.New("sim: clock not stepped by the cluster")
)

// Config configures a Cluster. The zero value works: a virtual clock
// stepped by RunFor, seed 0, a scheduler, kubelet defaults.
type Config struct {
	// Seed makes a run reproducible: UIDs, generated names, jitter and
	// the runtimes' injected faults derive from it.
	Seed uint64
	// Clock, if set, is the time of every part and is not stepped by the
	// cluster: inside a testing/synctest bubble pass clock.RealClock{} and
	// let time pass with time.Sleep. Default: a virtual *Clock starting at
	// Start that RunFor steps.
	Clock agent.Clock
	// Start is the virtual clock's start. Default 2030-01-01T00:00:00Z.
	Start time.Time
	// Agent adjusts each node's agent.Config before the agent is built;
	// NodeName, Runtime, PodSource, StatusClient, Node and Clock are the
	// cluster's, and the agent's events go to the store's Events and the
	// event log (and to a Recorder set here too). Default: the kubelet's defaults (relist PLEG every 1s,
	// resync 1m, crash-loop back-off 10s to 5m).
	Agent func(*agent.Config)
	// NodeAgent is Agent with the node's name, for a per-node setting;
	// it runs after Agent.
	NodeAgent func(node string, c *agent.Config)
	// Node adjusts a node's options (told its name and index): its pod
	// CIDR, InternalIP, labels (a zone) and capacity. It runs in AddNode;
	// a node.Config set by Agent or NodeAgent wins where it sets the
	// same.
	Node func(*NodeOptions)
	// Eviction, if set, gives a node (by name) the kubelet's eviction
	// manager: it returns the node's eviction.Config (nil: none on that
	// node), whose Summary, when nil, is the node's Summary API (package
	// stats over its runtime, so the usage scripted by CPUAnnotation,
	// MemoryAnnotation and DiskAnnotation, fake.Runtime.SetUsage and
	// SetNodeCapacity) and whose nil Thresholds are the kubelet's
	// defaults (memory.available<100Mi, nodefs.available<10%, ...).
	// An eviction.Config set by Agent or NodeAgent gets the same
	// Summary. Default: no eviction manager, no node pressure.
	Eviction func(node string) *eviction.Config
	// Runtime adjusts each node's fake.Config before its runtime is built;
	// Clock is the cluster's. The default Seed is derived from the
	// cluster's Seed and the node's name; PodBehavior reads the pod's
	// annotations (see the package doc) unless set.
	Runtime func(*fake.Config)
	// NoScheduler leaves pods without spec.nodeName unbound. Default: a
	// pod created without one is bound at once to the Ready,
	// schedulable node with the fewest pods (ties: name order).
	NoScheduler bool
	// NoTaintEviction turns the taint eviction controller off (for a test
	// of one). Default: pods on Nodes with NoExecute taints they do not
	// tolerate are deleted, as kube-controller-manager's
	// taint-eviction-controller does.
	NoTaintEviction bool
	// NodeMonitorGracePeriod is how long a node's Lease may go unrenewed
	// before the cluster's node lifecycle controller marks it Unknown.
	// Default 50s, kube-controller-manager's node-monitor-grace-period
	// since v1.32; checked every NodeMonitorPeriod (default 5s).
	NodeMonitorGracePeriod, NodeMonitorPeriod time.Duration
	// IdleTimeout bounds how long (real time) RunFor waits for the
	// cluster to go idle between steps. Default 30s.
	IdleTimeout time.Duration
	// NoEventLog turns the event log (Events) off, for large clusters.
	NoEventLog bool
	// Log receives the agents' logs, named by node. Default logr.Discard().
	Log logr.Logger
}

// Cluster is nodes running real nodekit agents on in-memory runtimes,
// against an in-memory API store, on one clock. Safe for concurrent use,
// except that RunFor is called from one goroutine at a time.
type Cluster struct {
	cfg   Config
	clock agent.Clock
	vc    *Clock // nil when Config.Clock was given
	store *Store
	idle  *idleProbe
	// evictor is the taint eviction controller; nil if off.
	evictor *evictor
	steps   atomic.Int64
	// running counts the RunFor, RunUntil and Settle calls under way:
	// Node.Stop settles the cluster itself only when none is.
	running atomic.Int32
	ctx     context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup

	mu     sync.Mutex
	closed bool
	nodes  map[string]*Node
	counts map[string]int // pods bound per node, for the scheduler
	// The event log: changes noted since the last flush, the logged views.
	noLog      bool
	log        []Event
	recorded   []Event // recorded events since the last flush
	dirtyPods  map[key]*v1.Pod
	dirtyNodes map[string]*v1.Node
	podViews   map[key]*podView
	nodeViews  map[string]nodeView
}

// New returns a cluster without nodes; Close it to stop them.
func New(c Config) (*Cluster, error) {
	if c.NodeMonitorGracePeriod < 0 || c.NodeMonitorPeriod < 0 || c.IdleTimeout < 0 {
		return nil, fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	}
	if c.NodeMonitorGracePeriod == 0 {
		c.NodeMonitorGracePeriod = 50 * time.Second
	}
	if c.NodeMonitorPeriod == 0 {
		c.NodeMonitorPeriod = 5 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 30 * time.Second
	}
	if c.Start.IsZero() {
		c.Start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	cl := &Cluster{cfg: c, nodes: map[string]*Node{}, counts: map[string]int{}, idle: newIdleProbe(),
		noLog: c.NoEventLog, dirtyPods: map[key]*v1.Pod{}, dirtyNodes: map[string]*v1.Node{},
		podViews: map[key]*podView{}, nodeViews: map[string]nodeView{}}
	if c.Clock != nil {
		cl.clock = c.Clock
	} else {
		cl.vc = NewClock(c.Start)
		cl.clock = cl.vc
	}
	cl.store = newStore(cl.clock, c.Seed)
	cl.store.onPod = cl.podChanged
	cl.store.onNode = cl.nodeChanged
	if !c.NoScheduler {
		cl.store.bind = cl.schedule
		// On its own clock the cluster binds once idle (settle), in name
		// order; on an external one it cannot tell idleness and binds at
		// once.
		cl.store.deferBind = cl.vc != nil
	}
	cl.ctx, cl.stop = context.WithCancel(context.Background())
	cl.wg.Add(1)
	go func() {
		defer cl.wg.Done()
		cl.monitorNodes(cl.ctx)
	}()
	if !c.NoTaintEviction {
		cl.evictor = newEvictor(cl)
		cl.wg.Add(1)
		go func() {
			defer cl.wg.Done()
			cl.evictor.run(cl.ctx)
		}()
	}
	return cl, nil
}

// Store is the cluster's API: give its clients to the controller under
// test.
func (c *Cluster) Store() *Store { return c.store }

// Clock is the clock of every part of the cluster.
func (c *Cluster) Clock() agent.Clock { return c.clock }

// Pods is the store's pod client of a namespace ("" for all).
func (c *Cluster) Pods(namespace string) *PodClient { return c.store.Pods(namespace) }

// NodeOptions describe a node as AddNode makes it; Config.Node adjusts
// them.
type NodeOptions struct {
	// Name is the node's name; Index its place in the order of AddNode,
	// from 0. Both are read-only.
	Name  string
	Index int
	// PodCIDR is the Node's spec.podCIDR, as the node IPAM controller
	// assigns it, and where its pods' IPs come from. Default
	// 10.244.<Index>.0/24 (10.245.0.0/24 after 10.244.255.0/24 ...), so
	// pod IPs are unique in the cluster.
	PodCIDR string
	// InternalIP is the Node's InternalIP address (with its Hostname, the
	// name). Default 172.16.<Index/254>.<Index%254+1>.
	InternalIP string
	// Labels are added to the Node's (for a zone:
	// topology.kubernetes.io/zone, which the node lifecycle controller's
	// rate limits go by).
	Labels map[string]string
	// Capacity is the Node's. Default 4 CPUs, 16Gi of memory, 100Gi of
	// ephemeral storage.
	Capacity v1.ResourceList
}

func defaultNodeOptions(name string, index int) NodeOptions {
	return NodeOptions{
		Name: name, Index: index,
		PodCIDR:    fmt.Sprintf("10.%d.%d.0/24", (244+index/256)%256, index%256),
		InternalIP: fmt.Sprintf("172.16.%d.%d", (index/254)%256, index%254+1),
		Capacity: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("16Gi"),
			v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		},
	}
}

// Node is one simulated node: an agent on its own in-memory runtime.
type Node struct {
	c       *Cluster
	name    string
	opts    NodeOptions
	runtime *fake.Runtime

	mu     sync.Mutex
	agent  *agent.Agent
	cancel context.CancelFunc
	done   chan struct{}
	// rec is the current agent's recorder, which the runtime's events
	// (Pulled, Created, Started, Killing...) go to as well.
	rec *recorder
}

// Name is the node's name.
func (n *Node) Name() string { return n.name }

// Options are the node's options, as Config.Node left them.
func (n *Node) Options() NodeOptions {
	o := n.opts
	o.Labels, o.Capacity = maps.Clone(o.Labels), o.Capacity.DeepCopy()
	return o
}

// Runtime is the node's in-memory runtime: program behaviours or inject
// faults with it. It survives Stop and Start.
func (n *Node) Runtime() *fake.Runtime { return n.runtime }

// Agent is the node's current agent (a new one after each Start).
func (n *Node) Agent() *agent.Agent {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.agent
}

// AddNode registers a node and starts its agent: the Node and its Lease
// appear in the store as the agent registers.
func (c *Cluster) AddNode(name string) (*Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if _, ok := c.nodes[name]; ok || name == "" {
		return nil, fmt.Errorf("%q: %w", name, ErrNodeExists)
	}
	opts := defaultNodeOptions(name, len(c.nodes))
	if c.cfg.Node != nil {
		c.cfg.Node(&opts)
		opts.Name, opts.Index = name, len(c.nodes)
	}
	rc := fake.Config{Seed: c.cfg.Seed ^ hash(name), PodBehavior: AnnotationBehavior, PodCIDR: opts.PodCIDR}
	if c.cfg.Runtime != nil {
		c.cfg.Runtime(&rc)
	}
	rc.Clock = c.clock
	n := &Node{c: c, name: name, opts: opts}
	rc.Recorder = &runtimeEvents{n: n, next: rc.Recorder}
	rt, err := fake.New(rc)
	if err != nil {
		return nil, err
	}
	n.runtime = rt
	c.store.setPodCIDR(name, rc.PodCIDR)
	if err := n.startLocked(); err != nil {
		return nil, err
	}
	c.nodes[name] = n
	return n, nil
}

func hash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// startLocked builds and runs a new agent on the node's runtime.
func (n *Node) startLocked() error {
	c := n.c
	// The agent's default relist PLEG, as the kubelet's; Config.Agent may
	// turn the evented one on.
	ac := agent.Config{Log: c.cfg.Log.WithName(n.name)}
	if c.cfg.Agent != nil {
		c.cfg.Agent(&ac)
	}
	if c.cfg.NodeAgent != nil {
		c.cfg.NodeAgent(n.name, &ac)
	}
	if c.cfg.Eviction != nil {
		if ec := c.cfg.Eviction(n.name); ec != nil {
			ac.Eviction = ec
		}
	}
	if ac.Eviction != nil && ac.Eviction.Summary == nil {
		ec := *ac.Eviction // the caller's Config is not written
		// The node's stats are its runtime's alone: no host cgroups,
		// logs or file systems.
		sp, err := stats.New(stats.Config{NodeName: n.name, Runtime: n.runtime, RootDir: "/",
			PodLogsDir: "-", PodCgroupRoot: "-", Clock: c.clock, Log: ac.Log.WithName("stats")})
		if err != nil {
			return err
		}
		ec.Summary = eviction.SummaryProviderFunc(sp.Summary)
		ac.Eviction = &ec
	}
	ac.NodeName, ac.Runtime, ac.Clock = n.name, n.runtime, c.clock
	ac.PodSource = c.store.Pods("")
	ac.StatusClient = func(ns string) status.PodClient { return c.store.Pods(ns) }
	ac.Jitter = c.jitter(n.name)
	rec := &recorder{c: c, source: v1.EventSource{Component: "kubelet", Host: n.name}}
	if ac.Recorder != nil {
		rec.next = ac.Recorder
	}
	ac.Recorder = rec
	nc := &node.Config{}
	if ac.Node != nil {
		nc = ac.Node
	}
	nc.Nodes, nc.Leases = c.store.Nodes(), c.store.Leases(v1.NamespaceNodeLease)
	if nc.Capacity == nil {
		nc.Capacity = n.opts.Capacity.DeepCopy()
	}
	if nc.Machine == nil {
		// The same machine as the capacity, read from no host file: a
		// simulated node's nodeInfo is the same on every run and host.
		nc.Machine = node.Machine{NumCores: 4, MemoryCapacity: 16 << 30, EphemeralStorageCapacity: 100 << 30}
	}
	if len(nc.Addresses) == 0 && len(nc.NodeIPs) == 0 {
		if n.opts.InternalIP != "" {
			nc.Addresses = append(nc.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: n.opts.InternalIP})
		}
		nc.Addresses = append(nc.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: n.name})
	}
	if len(n.opts.Labels) > 0 {
		labels := maps.Clone(n.opts.Labels)
		maps.Copy(labels, nc.Labels)
		nc.Labels = labels
	}
	ac.Node = nc
	a, err := agent.New(ac)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan struct{})
	n.mu.Lock()
	n.agent, n.cancel, n.done, n.rec = a, cancel, done, rec
	n.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(done)
		if err := a.Run(ctx); err != nil {
			c.cfg.Log.Error(err, "Agent stopped", "node", n.name)
		}
	}()
	return nil
}

// Stop stops the node's agent as a crash would: its pods keep running on
// the runtime, its Lease is no longer renewed, so the node lifecycle
// controller marks the Node Unknown after NodeMonitorGracePeriod. It
// returns once the agent has returned.
//
// On the cluster's own clock, called while no RunFor, RunUntil or Settle
// runs (between them, as a test does), it first lets the cluster go idle,
// so that the agent acts on what came before in the instant (a pod
// deleted just before it stops is killed, or not, the same way in every
// run); else whether it got to it races with its cancellation. From
// RunUntil's condition the cluster is idle already.
func (n *Node) Stop() {
	n.mu.Lock()
	running := n.cancel != nil
	n.mu.Unlock()
	if !running {
		return
	}
	if c := n.c; c.vc != nil && c.running.Load() == 0 {
		// Best effort: a cluster that does not go idle (RunFor would
		// fail on it) has the agent stopped at once.
		_ = c.settle(c.ctx)
	}
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel = nil
	n.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Start restarts a stopped node's agent on the same runtime, as a kubelet
// restart: it finds its pods running and adopts them.
func (n *Node) Start() error {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if n.c.closed {
		return ErrClosed
	}
	n.mu.Lock()
	running := n.cancel != nil
	n.mu.Unlock()
	if running {
		return nil
	}
	return n.startLocked()
}

// Node returns the named node, or nil.
func (c *Cluster) Node(name string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[name]
}

// Nodes returns the nodes in name order.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// CreatePod creates a pod in the store (see PodClient.Create).
func (c *Cluster) CreatePod(ctx context.Context, pod *v1.Pod) (*v1.Pod, error) {
	return c.Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
}

// DeletePod deletes a pod gracefully, as kubectl delete does.
func (c *Cluster) DeletePod(ctx context.Context, namespace, name string) error {
	return c.store.Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// Pod returns a copy of a stored pod.
func (c *Cluster) Pod(namespace, name string) (*v1.Pod, error) {
	return c.store.getPod(nsOrDefault(namespace), name)
}

// ListPods returns every stored pod, by namespace and name.
func (c *Cluster) ListPods() []*v1.Pod {
	l, _ := c.store.listPods("", metav1.ListOptions{})
	out := make([]*v1.Pod, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out
}

// Close stops every node (their pods are left on the runtimes) and the
// cluster's own loops, and returns once all have returned; then it ends
// every watch still open on the store.
func (c *Cluster) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	c.wg.Wait()
	c.store.stopWatches() // the test's own watches end too
}

// settle waits until idle, then logs what changed.
func (c *Cluster) settle(ctx context.Context) error {
	c.running.Add(1)
	defer c.running.Add(-1)
	for {
		if !c.idle.wait(ctx, c.cfg.IdleTimeout) {
			if err := ctx.Err(); err != nil {
				return err
			}
			return ErrNotIdle
		}
		// The scheduler's turn: what the instant created, in name order;
		// then the agents' and controllers' again.
		if !c.store.deferBind || !c.store.bindPending() {
			break
		}
	}
	c.mu.Lock()
	c.flushLocked()
	c.mu.Unlock()
	return nil
}

// RunFor lets d of virtual time pass: each time every goroutine of the
// process is blocked it moves the clock to the next timer (or to the end)
// and fires it. It needs the cluster's own virtual clock.
func (c *Cluster) RunFor(ctx context.Context, d time.Duration) error {
	if c.vc == nil {
		return ErrRealClock
	}
	c.running.Add(1)
	defer c.running.Add(-1)
	end := c.vc.Now().Add(d)
	for {
		if err := c.settle(ctx); err != nil {
			return err
		}
		next, ok := c.vc.next()
		if !ok || next.After(end) {
			c.vc.advance(end)
			return c.settle(ctx)
		}
		c.steps.Add(1)
		c.vc.advance(next)
	}
}

// Steps is how many times RunFor and RunUntil have moved the clock to a
// timer: what a run costs, besides the work done at each step.
func (c *Cluster) Steps() int64 { return c.steps.Load() }

// Settle waits, without moving the clock, until the cluster is idle.
func (c *Cluster) Settle(ctx context.Context) error { return c.settle(ctx) }

// RunUntil steps the clock as RunFor does until cond holds (checked while
// the cluster is idle) or limit of virtual time has passed; it returns
// ErrTimeout then.
func (c *Cluster) RunUntil(ctx context.Context, limit time.Duration, cond func() bool) error {
	if c.vc == nil {
		return ErrRealClock
	}
	c.running.Add(1)
	defer c.running.Add(-1)
	end := c.vc.Now().Add(limit)
	for {
		if err := c.settle(ctx); err != nil {
			return err
		}
		if cond() {
			return nil
		}
		next, ok := c.vc.next()
		if !ok || next.After(end) {
			return fmt.Errorf("sim: condition not met after %v: %w", limit, ErrTimeout)
		}
		c.steps.Add(1)
		c.vc.advance(next)
	}
}

// ErrTimeout: RunUntil's condition did not hold within its limit.
var ErrTimeout = errors.New("sim: timeout")

// jitter is the agents' jitter: reproducible from the seed, the node and
// the instant, whatever order concurrent callers come in.
func (c *Cluster) jitter(nodeName string) func(d time.Duration, maxFactor float64) time.Duration {
	base := c.cfg.Seed ^ hash(nodeName)
	return func(d time.Duration, maxFactor float64) time.Duration {
		if maxFactor <= 0 {
			maxFactor = 1
		}
		x := base ^ uint64(c.clock.Now().UnixNano()) ^ uint64(d)
		x ^= x >> 33
		x *= 0xff51afd7ed558ccd
		x ^= x >> 33
		f := float64(x>>11) / (1 << 53)
		return d + time.Duration(f*maxFactor*float64(d))
	}
}

// schedule picks a node for a new pod: Ready and schedulable, fewest pods,
// then name order; "" if none. The store's lock is held.
func (c *Cluster) schedule(p *v1.Pod) string {
	best, bestN := "", 0
	for name, n := range c.store.nodes {
		if n.Spec.Unschedulable || !nodeReady(n) || !toleratesPressure(p, n) {
			continue
		}
		k := c.countLocked(name)
		if best == "" || k < bestN || (k == bestN && name < best) {
			best, bestN = name, k
		}
	}
	return best
}

func (c *Cluster) countLocked(node string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[node]
}

// Pressure conditions and the NoSchedule taints the node lifecycle
// controller makes of them (TaintNodesByCondition), which the scheduler
// reads.
var pressureTaints = []struct {
	cond       v1.NodeConditionType
	taint      string
	bestEffort bool // only BestEffort pods are kept off: the others get the toleration
}{
	{v1.NodeMemoryPressure, v1.TaintNodeMemoryPressure, true},
	{v1.NodeDiskPressure, v1.TaintNodeDiskPressure, false},
	{v1.NodePIDPressure, v1.TaintNodePIDPressure, false},
}

// toleratesPressure reports whether p may go to n as the scheduler's
// TaintToleration filter sees the pressure taints of n's conditions: the
// control plane tolerates memory pressure for pods other than BestEffort.
func toleratesPressure(p *v1.Pod, n *v1.Node) bool {
	for _, pt := range pressureTaints {
		if conditionStatus(n, pt.cond) != v1.ConditionTrue || (pt.bestEffort && podutil.QOSClass(p) != v1.PodQOSBestEffort) {
			continue
		}
		taint := v1.Taint{Key: pt.taint, Effect: v1.TaintEffectNoSchedule}
		if !slices.ContainsFunc(p.Spec.Tolerations, func(t v1.Toleration) bool { return t.ToleratesTaint(logr.Discard(), &taint, false) }) {
			return false
		}
	}
	return true
}

func conditionStatus(n *v1.Node, t v1.NodeConditionType) v1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return v1.ConditionUnknown
}

func nodeReady(n *v1.Node) bool {
	return readyStatus(n) == v1.ConditionTrue
}
