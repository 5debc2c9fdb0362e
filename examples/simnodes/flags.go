package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/examples/internal/nodeflags"
)

var errUsage = nodeflags.ErrUsage

// SimnodeLabel is set on every Node, with the name prefix as its value,
// so a workload (or a bench) selects the simulated nodes.
const SimnodeLabel = "nodekit.io/simnode"

type options struct {
	kubeconfig   string
	nodes        int
	shard, total int
	processes    int
	prefix       string
	podCIDR      netip.Prefix
	nodeCIDRSize int
	nodeIPCIDR   netip.Prefix
	labels       map[string]string
	capacity     v1.ResourceList
	maxPods      int
	qps          float64
	burst        int
	maxInFlight  int
	events       bool
	verbosity    int
	duration     time.Duration
	plegEvents   int
	firstStatus  time.Duration
	gcPercent    int    // 0: Go's (GOGC, else 100); default 25
	memLimitMiB  int    // 0: Go's (GOMEMLIMIT, else none)
	pprofAddr    string // empty: no profiling endpoint
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	var shard, podCIDR, nodeIPCIDR, labels, cpu, memory, storage string
	fs := flag.NewFlagSet("simnodes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: go run ./examples/simnodes -kubeconfig FILE -nodes N [-shard i/n] [flags]

Runs the i-th of n shards of N simulated nodekit nodes (runtime/fake) on the
cluster of -kubeconfig: each registers its Node, renews its Lease and runs
the pods bound to it through the kubelet's logic, scripted by sim's
annotations. SIGINT or SIGTERM stops them, leaving Nodes and pods behind.

Flags:
`)
		fs.PrintDefaults()
	}
	def := os.Getenv("KUBECONFIG")
	if home, err := os.UserHomeDir(); def == "" && err == nil {
		def = filepath.Join(home, ".kube", "config")
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", def, "kubeconfig of the cluster (default $KUBECONFIG, else ~/.kube/config)")
	fs.IntVar(&o.nodes, "nodes", 10, "nodes in all shards together")
	fs.StringVar(&shard, "shard", "0/1", "`i/n`: run the i-th (from 0) of n equal blocks of the nodes")
	fs.IntVar(&o.processes, "processes", 1, "run the nodes as this many processes of this program, shard i/n each, and wait for them (SIGINT or SIGTERM is passed on); not with -shard")
	fs.StringVar(&o.prefix, "name-prefix", "simnode-", "node names are this prefix and the node's number")
	fs.StringVar(&podCIDR, "pod-cidr", "10.128.0.0/9", "IPv4 range the nodes' pod CIDRs are cut from; empty: no spec.podCIDR, pod IPs 10.x.y.z per node")
	fs.IntVar(&o.nodeCIDRSize, "node-cidr-size", 24, "prefix length of each node's pod CIDR")
	fs.StringVar(&nodeIPCIDR, "node-ip-cidr", "172.16.0.0/12", "IPv4 range of the nodes' InternalIPs, node k the k-th host address")
	fs.StringVar(&labels, "node-labels", "", "labels `key=value,...` added to every Node (besides "+SimnodeLabel+"=<prefix>)")
	fs.StringVar(&cpu, "cpu", "32", "cpu capacity of each node")
	fs.StringVar(&memory, "memory", "256Gi", "memory capacity of each node")
	fs.StringVar(&storage, "ephemeral-storage", "100Gi", "ephemeral-storage capacity of each node")
	fs.IntVar(&o.maxPods, "max-pods", 110, "pods capacity of each node")
	fs.Float64Var(&o.qps, "qps", 100, "client QPS toward the apiserver of each of the process's two clients (pods, events and informers; the nodes' Leases and Node status), shared by its nodes")
	fs.IntVar(&o.burst, "burst", 200, "each client's burst")
	fs.IntVar(&o.maxInFlight, "max-in-flight", 200, "requests the process keeps open toward the apiserver at once, watches aside; more wait for one to end "+
		"(beyond the apiserver's 250 streams per HTTP/2 connection each would dial a TLS connection of its own)")
	fs.BoolVar(&o.events, "events", true, "send the nodes' events (Pulled, Created, Started, Killing, probe failures ...) to the apiserver, as the kubelet does")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity: 0 errors and milestones, 1 and up the agents' detail")
	fs.DurationVar(&o.duration, "duration", 0, "stop by itself after this long; 0 runs until signalled")
	fs.IntVar(&o.plegEvents, "pleg-event-capacity", 64, "events each node's PLEG buffers (48 bytes each, allocated whole with the node; the kubelet's 1000 are 47 KiB a node); "+
		"a relist's events beyond it are dropped and their pods wait for the next resync (1m)")
	fs.DurationVar(&o.firstStatus, "first-status-delay", time.Second, "how long a pod's first sync holds back its Pending status while the in-memory runtime starts it "+
		"(agent.Config.FirstStatusDelay): a pod started within it gets one status write, Running, instead of two; 0: the kubelet's order, Pending first")
	fs.IntVar(&o.gcPercent, "gc-percent", 25, "the Go garbage collector's target (debug.SetGCPercent): how far the heap grows over the live one (and the stacks) before a collection; "+
		"25 trades CPU for memory (at 1,000 nodes × 2 pods: 0.21 MiB and 0.051–0.056 CPU-s a node, against 0.29 and 0.033 at Go's 100); 0 keeps Go's (GOGC, else 100)")
	fs.IntVar(&o.memLimitMiB, "memory-limit", 0, "a soft limit of the process's memory in MiB (debug.SetMemoryLimit, Go's GOMEMLIMIT): the collector runs more often as the heap nears it, trading CPU for a lower peak; "+
		"set it above the live heap (at a limit below, the collector takes up to half the CPU); 0 keeps Go's (GOMEMLIMIT, else none)")
	fs.StringVar(&o.pprofAddr, "pprof-addr", "", "`host:port` to serve net/http/pprof's /debug/pprof/ on (port 0: any, logged); empty: none")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...)
	}
	var err error
	if o.shard, o.total, err = parseShard(shard); err != nil {
		return nil, bad("-shard: %v", err)
	}
	if o.nodes < 1 {
		return nil, bad("-nodes must be at least 1, got %d", o.nodes)
	}
	if o.processes < 1 || o.processes > o.nodes {
		return nil, bad("-processes %d: want 1 to -nodes %d", o.processes, o.nodes)
	}
	if o.processes > 1 && o.total > 1 {
		return nil, bad("-processes %d with -shard %s: a process runs one shard", o.processes, shard)
	}
	if o.total > o.nodes {
		return nil, bad("-shard %s: more shards than -nodes %d", shard, o.nodes)
	}
	if o.kubeconfig == "" {
		return nil, bad("-kubeconfig is required")
	}
	if o.duration < 0 {
		return nil, bad("-duration must not be negative, got %s", o.duration)
	}
	if o.qps <= 0 || o.burst < 1 {
		return nil, bad("-qps and -burst must be positive")
	}
	if o.maxInFlight < 1 {
		return nil, bad("-max-in-flight must be at least 1")
	}
	if o.maxPods < 1 {
		return nil, bad("-max-pods must be at least 1")
	}
	if o.firstStatus < 0 {
		return nil, fmt.Errorf("%w: -first-status-delay %v is negative", errUsage, o.firstStatus)
	}
	if o.plegEvents < 1 {
		return nil, bad("-pleg-event-capacity must be at least 1")
	}
	if o.pprofAddr != "" {
		if _, _, err := net.SplitHostPort(o.pprofAddr); err != nil {
			return nil, bad("-pprof-addr %q: want host:port", o.pprofAddr)
		}
	}
	if o.gcPercent < 0 {
		return nil, bad("-gc-percent must not be negative (the collector stays on)")
	}
	if o.memLimitMiB < 0 {
		return nil, bad("-memory-limit must not be negative")
	}
	if podCIDR != "" {
		if o.podCIDR, err = netip.ParsePrefix(podCIDR); err != nil || !o.podCIDR.Addr().Is4() {
			return nil, bad("-pod-cidr %q: want an IPv4 prefix", podCIDR)
		}
		o.podCIDR = o.podCIDR.Masked()
		if o.nodeCIDRSize < o.podCIDR.Bits() || o.nodeCIDRSize > 30 {
			return nil, bad("-node-cidr-size %d: want between -pod-cidr's %d and 30", o.nodeCIDRSize, o.podCIDR.Bits())
		}
		if blocks := uint64(1) << (o.nodeCIDRSize - o.podCIDR.Bits()); uint64(o.nodes) > blocks {
			return nil, bad("-pod-cidr %s holds %d /%d blocks, fewer than -nodes %d", o.podCIDR, blocks, o.nodeCIDRSize, o.nodes)
		}
	}
	if o.nodeIPCIDR, err = netip.ParsePrefix(nodeIPCIDR); err != nil || !o.nodeIPCIDR.Addr().Is4() {
		return nil, bad("-node-ip-cidr %q: want an IPv4 prefix", nodeIPCIDR)
	}
	o.nodeIPCIDR = o.nodeIPCIDR.Masked()
	if hosts := uint64(1)<<(32-o.nodeIPCIDR.Bits()) - 2; uint64(o.nodes) > hosts {
		return nil, bad("-node-ip-cidr %s holds fewer than -nodes %d addresses", o.nodeIPCIDR, o.nodes)
	}
	if o.labels, err = parseLabels(labels); err != nil {
		return nil, bad("-node-labels: %v", err)
	}
	o.labels[SimnodeLabel] = strings.TrimSuffix(o.prefix, "-")
	o.capacity = v1.ResourceList{}
	for _, r := range []struct {
		name v1.ResourceName
		flag string
		val  string
	}{{v1.ResourceCPU, "-cpu", cpu}, {v1.ResourceMemory, "-memory", memory}, {v1.ResourceEphemeralStorage, "-ephemeral-storage", storage}} {
		q, err := resource.ParseQuantity(r.val)
		if err != nil || q.Sign() <= 0 {
			return nil, bad("%s %q: want a positive quantity", r.flag, r.val)
		}
		o.capacity[r.name] = q
	}
	return o, nil
}

// parseShard reads "i/n" with 0 <= i < n.
func parseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	if ok {
		i, err = strconv.Atoi(a)
		if err == nil {
			n, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("%q: want i/n with 0 <= i < n", s)
	}
	return i, n, nil
}

func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: want key=value", kv)
		}
		out[k] = v // node.New validates keys and values
	}
	return out, nil
}

// shardRange is the node numbers [from, to) of shard i of n.
func shardRange(nodes, i, n int) (from, to int) {
	return i * nodes / n, (i + 1) * nodes / n
}

// nodeName is node k's name: the prefix and k zero-padded to the width
// of the largest number, so that names sort as numbers.
func nodeName(prefix string, k, nodes int) string {
	return fmt.Sprintf("%s%0*d", prefix, len(strconv.Itoa(nodes-1)), k)
}

// nthBlock is the k-th prefix of length bits within p.
func nthBlock(p netip.Prefix, bits, k int) netip.Prefix {
	b := p.Addr().As4()
	v := binary.BigEndian.Uint32(b[:]) + uint32(k)<<(32-bits)
	binary.BigEndian.PutUint32(b[:], v)
	return netip.PrefixFrom(netip.AddrFrom4(b), bits)
}

// nthHost is the k-th host address of p (the network address skipped).
func nthHost(p netip.Prefix, k int) netip.Addr {
	b := p.Addr().As4()
	binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(b[:])+uint32(k)+1)
	return netip.AddrFrom4(b)
}
