package harness

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime/fake"
)

// Errors of the Cluster's methods.
var (
	// ErrUnknownNode: a pod names no node, or one AddNode did not add.
	ErrUnknownNode = errors.New("harness: unknown node")
	// ErrNotFound: Delete of a pod the store does not hold.
	ErrNotFound = errors.New("harness: pod not found")
	// ErrClosed: the Cluster was closed.
	ErrClosed = errors.New("harness: cluster closed")
	// ErrNodeExists: AddNode of a name already added.
	ErrNodeExists = errors.New("harness: node exists")
)

// source is the name the nodes' agents know the store by: the apiserver's,
// so the pods are ordinary (not static) pods.
const source = podutil.ApiserverSource

// Config configures a Cluster. The zero value works.
type Config struct {
	// PollInterval is how often WaitFor looks at the pods. Default 10ms.
	PollInterval time.Duration
	// Node, if set, adjusts each node's agent.Config before the agent is
	// built (NodeName, Runtime and Sources are the harness's). By default
	// the agents relist every 20ms and resync every 10s, and stop their
	// pods when the cluster closes.
	Node func(*agent.Config)
	// Log receives the agents' logs, named by node. Default logr.Discard().
	Log logr.Logger
}

// Cluster is a set of nodes fed from one pod store. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex // guards the fields below and orders the SETs sent
	closed bool
	nodes  map[string]*Node
	pods   map[string]*v1.Pod // namespace/name -> pod
	uids   int
}

// Node is one agent and its runtime.
type Node struct {
	name    string
	agent   *agent.Agent
	runtime *fake.Runtime
}

// Name is the node's name.
func (n *Node) Name() string { return n.name }

// Runtime is the node's in-memory runtime: program container behaviours or
// inject faults with it.
func (n *Node) Runtime() *fake.Runtime { return n.runtime }

// Agent is the node's agent.
func (n *Node) Agent() *agent.Agent { return n.agent }

// New returns an empty Cluster. Close it to stop its nodes.
func New(c Config) (*Cluster, error) {
	if c.PollInterval < 0 {
		return nil, fmt.Errorf("harness: negative PollInterval: %w", agent.ErrInvalidConfig)
	}
	if c.PollInterval == 0 {
		c.PollInterval = 10 * time.Millisecond
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Cluster{cfg: c, ctx: ctx, cancel: cancel, nodes: map[string]*Node{}, pods: map[string]*v1.Pod{}}, nil
}

// AddNode starts a node: a new in-memory runtime and an agent on it, fed the
// store's pods bound to name.
func (c *Cluster) AddNode(name string) (*Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if _, ok := c.nodes[name]; ok || name == "" {
		return nil, fmt.Errorf("%q: %w", name, ErrNodeExists)
	}
	rt, err := fake.New(fake.Config{})
	if err != nil {
		return nil, err
	}
	ac := agent.Config{
		RelistPeriod:       20 * time.Millisecond,
		RuntimeCheckPeriod: time.Second,
		SyncFrequency:      10 * time.Second,
		SyncErrorBackOff:   100 * time.Millisecond,
		TerminateOnExit:    true,
		ShutdownTimeout:    10 * time.Second,
		Log:                c.cfg.Log.WithName(name),
	}
	if c.cfg.Node != nil {
		c.cfg.Node(&ac)
	}
	ac.NodeName, ac.Runtime, ac.Sources = name, rt, []string{source}
	a, err := agent.New(ac)
	if err != nil {
		return nil, err
	}
	n := &Node{name: name, agent: a, runtime: rt}
	c.nodes[name] = n
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := a.Run(c.ctx); err != nil {
			c.cfg.Log.Error(err, "Agent stopped", "node", name)
		}
	}()
	// The store's view of the node, even if empty: the source is ready.
	if err := c.sendLocked(c.ctx, n); err != nil {
		return nil, err
	}
	return n, nil
}

// Node returns the named node, or nil.
func (c *Cluster) Node(name string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[name]
}

// Apply creates or replaces a pod (by namespace and name) on the node its
// spec.nodeName names. The store keeps a copy; a new pod gets a UID and a
// creation time if it has none, a replaced one keeps its UID. Moving a pod
// to another node removes it from the first.
func (c *Cluster) Apply(ctx context.Context, pod *v1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	n, ok := c.nodes[pod.Spec.NodeName]
	if !ok {
		return fmt.Errorf("pod %s/%s on node %q: %w", pod.Namespace, pod.Name, pod.Spec.NodeName, ErrUnknownNode)
	}
	p := pod.DeepCopy()
	if p.Namespace == "" {
		p.Namespace = metav1.NamespaceDefault
	}
	key := p.Namespace + "/" + p.Name
	old := c.pods[key]
	if p.UID == "" {
		if old != nil {
			p.UID = old.UID
		} else {
			c.uids++
			p.UID = types.UID(fmt.Sprintf("harness-%d", c.uids))
		}
	}
	if p.CreationTimestamp.IsZero() {
		p.CreationTimestamp = metav1.Now()
		if old != nil {
			p.CreationTimestamp = old.CreationTimestamp
		}
	}
	c.pods[key] = p
	if old != nil && old.Spec.NodeName != p.Spec.NodeName {
		if err := c.sendLocked(ctx, c.nodes[old.Spec.NodeName]); err != nil {
			return err
		}
	}
	return c.sendLocked(ctx, n)
}

// Delete removes a pod from the store; its node's agent stops it.
func (c *Cluster) Delete(ctx context.Context, namespace, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	key := namespace + "/" + name
	p, ok := c.pods[key]
	if !ok {
		return fmt.Errorf("pod %s: %w", key, ErrNotFound)
	}
	delete(c.pods, key)
	return c.sendLocked(ctx, c.nodes[p.Spec.NodeName])
}

// sendLocked sends node n the SET of its pods in the store; c.mu is held so
// SETs reach each node in the order of the changes.
func (c *Cluster) sendLocked(ctx context.Context, n *Node) error {
	var pods []*v1.Pod
	for _, p := range c.pods {
		if p.Spec.NodeName == n.name {
			// The agent owns what it is sent: a copy per send.
			pods = append(pods, p.DeepCopy())
		}
	}
	select {
	case n.agent.Channel(source) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: pods}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	}
}

// Pods returns every node's pods with the statuses their agents generated,
// sorted by namespace and name. A pod its agent has not seen yet is not
// listed, nor is a deleted one, from the moment its agent learns of the
// deletion (it may still be stopping: ask the node's Runtime).
func (c *Cluster) Pods() []*v1.Pod {
	c.mu.Lock()
	nodes := make([]*Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		nodes = append(nodes, n)
	}
	c.mu.Unlock()
	var out []*v1.Pod
	for _, n := range nodes {
		out = append(out, n.agent.Pods()...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// WaitFor calls cond with Pods every PollInterval until it returns true,
// and returns nil then, or an error wrapping ctx's when ctx ends first.
func (c *Cluster) WaitFor(ctx context.Context, cond func(pods []*v1.Pod) bool) error {
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	for {
		pods := c.Pods()
		if cond(pods) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("harness: condition not met with %d pods: %w", len(pods), ctx.Err())
		case <-c.ctx.Done():
			return ErrClosed
		case <-t.C:
		}
	}
}

// Close stops every node, with its pods (unless Config.Node turned
// TerminateOnExit off), and returns once every agent has returned.
func (c *Cluster) Close() {
	c.cancel() // first: a send in progress gives up
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
}
