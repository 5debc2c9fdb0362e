package provider_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/provider/providertest"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/status/statustest"
)

// runningClock wraps a statustest client and records, per pod, when the
// first status write that made it Running returned.
type runningClock struct {
	*statustest.Fake
	mu      sync.Mutex
	running map[string]time.Time
	warm    chan struct{}
	all     chan struct{}
	n       int
	// slowEvery > 0: every slowEvery-th status write takes slowDelay, as a loaded
	// apiserver's round trips have a tail.
	slowEvery int64
	patches   atomic.Int64
}

// warmName is a pod run before the measured ones: once it is Running, the
// agent is subscribed to the provider and its loops are going.
const warmName = "warm"

type timedClient struct {
	*statustest.PodClient
	rc *runningClock
}

// apiDelay is what each apiserver call costs: a real apiserver answers a
// pod GET or status write in about a millisecond, and the status manager
// syncs pods one after the other, so calls per pod show in the latency.
const apiDelay = time.Millisecond

// slowDelay is the slow round trip of the "adds-slowtail" arrival.
const slowDelay = 20 * time.Millisecond

func (c timedClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error) {
	time.Sleep(apiDelay)
	return c.PodClient.Get(ctx, name, opts)
}

func (c timedClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*v1.Pod, error) {
	c.write()
	p, err := c.PodClient.Patch(ctx, name, pt, data, opts, sub...)
	c.wrote(name, p, err)
	return p, err
}

// UpdateStatus is the write of nodeutil's default (agent.Config.UpdateKnownStatus).
func (c timedClient) UpdateStatus(ctx context.Context, pod *v1.Pod, opts metav1.UpdateOptions) (*v1.Pod, error) {
	c.write()
	p, err := c.PodClient.UpdateStatus(ctx, pod, opts)
	c.wrote(pod.Name, p, err)
	return p, err
}

// write takes a status write's time.
func (c timedClient) write() {
	d := apiDelay
	if c.rc.slowEvery > 0 && c.rc.patches.Add(1)%c.rc.slowEvery == 0 {
		d = slowDelay
	}
	time.Sleep(d)
}

// wrote records when a write made the pod Running.
func (c timedClient) wrote(name string, p *v1.Pod, err error) {
	if err == nil && p.Status.Phase == v1.PodRunning {
		now := time.Now()
		c.rc.mu.Lock()
		if _, ok := c.rc.running[name]; !ok {
			c.rc.running[name] = now
			if name == warmName {
				close(c.rc.warm)
			} else if len(c.rc.running) == c.rc.n+1 {
				close(c.rc.all)
			}
		}
		c.rc.mu.Unlock()
	}
}

// BenchmarkToRunning creates N pods at once on an agent over a notifying
// instant provider (providertest's, as virtual-kubelet's mock) with the
// status written to an in-memory apiserver, and measures each pod from its
// creation (the SET on the agent's source) to the status write that made it
// Running in the apiserver: the path NotifyPods → evented PLEG → pod worker
// → SyncPod → status manager → status write (an update, nodeutil's
// default: agent.Config.UpdateKnownStatus). It reports p50 and p99 of that
// latency, the wall time to all Running, and the apiserver writes and
// reads per pod. Every apiserver call takes apiDelay. The sync period and relist are long: nothing may wait on
// them. Arrival "set" creates the N pods in one SET; "adds" sends one ADD
// per pod, a millisecond of creation time apart, as the apiserver's watch
// delivers them (each admitted in its own batch), latency from each pod's
// own ADD (s-sending is how long the agent took to accept them all);
// "adds-slowtail" is "adds" with every tenth write taking 20 ms;
// "adds-node" is "adds" on an agent set up as nodeutil's (a Node,
// IgnoreCapacity: the admission of a virtual node).
func BenchmarkToRunning(b *testing.B) {
	type run struct {
		n       int
		arrival string
	}
	runs := []run{{1, "set"}, {100, "set"}, {1000, "set"}, {100, "adds"}, {1000, "adds"}, {1000, "adds-slowtail"}, {1000, "adds-node"}}
	for _, r := range runs {
		n := r.n
		name := fmt.Sprintf("pods=%d", n)
		if r.arrival != "set" {
			name += "/" + r.arrival
		}
		b.Run(name, func(b *testing.B) {
			var lat []float64
			var wall, sending, writes, reads float64
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				warm := testPod(warmName)
				pods := make([]*v1.Pod, n)
				for j := range pods {
					pods[j] = testPod(fmt.Sprintf("r%d-p%04d", i, j))
					pods[j].CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(j) * time.Millisecond))
				}
				rc := &runningClock{Fake: statustest.New(append(pods, warm)...), running: map[string]time.Time{},
					warm: make(chan struct{}), all: make(chan struct{}), n: n}
				for _, p := range pods {
					// The resourceVersion the apiserver gave it, as its watch delivers it.
					stored, _ := rc.Pod(p.Namespace, p.Name)
					p.ResourceVersion = stored.ResourceVersion
				}
				if r.arrival == "adds-slowtail" {
					rc.slowEvery = 10
				}
				p := providertest.New(nil)
				rt, err := provider.New(provider.Config{Provider: &providertest.Notifier{Provider: p}})
				if err != nil {
					b.Fatal(err)
				}
				ac := agent.Config{NodeName: "vk", Runtime: rt, Sources: []string{src}, MaxPods: n + 10,
					StatusClient: func(ns string) status.PodClient { return timedClient{rc.Pods(ns), rc} }, UpdateKnownStatus: true,
					RelistPeriod: time.Minute, RuntimeCheckPeriod: 5 * time.Second, SyncFrequency: time.Minute}
				if r.arrival == "adds-node" {
					api := nodetest.New()
					ac.Node, ac.IgnoreCapacity = &node.Config{Nodes: api.Nodes(), Leases: api.Leases(), Virtual: true}, true
				}
				a, err := agent.New(ac)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- a.Run(ctx) }()
				a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: []*v1.Pod{warm}}
				select {
				case <-rc.warm:
				case <-time.After(time.Minute):
					b.Fatal("the warm-up pod is not Running after a minute")
				}
				rc.ClearActions()
				goruntime.GC()
				b.StartTimer()

				start := time.Now()
				sent := make(map[string]time.Time, n)
				if r.arrival == "set" {
					a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: append(pods, warm)}
				} else {
					for _, p := range pods {
						sent[p.Name] = time.Now()
						a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{p}}
					}
				}
				sending += time.Since(start).Seconds()
				select {
				case <-rc.all:
				case <-time.After(time.Minute):
					b.Fatalf("%d of %d pods Running in the apiserver after a minute", len(rc.running), n)
				}
				wall += time.Since(start).Seconds()

				b.StopTimer()
				rc.mu.Lock()
				for name, t := range rc.running {
					if name == warmName {
						continue
					}
					from, ok := sent[name]
					if !ok {
						from = start
					}
					lat = append(lat, t.Sub(from).Seconds()*1e3)
				}
				rc.mu.Unlock()
				writes += float64(rc.Count(statustest.VerbPatch) + rc.Count(statustest.VerbUpdate))
				reads += float64(rc.Count(statustest.VerbGet))
				cancel()
				<-done
				b.StartTimer()
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(lat[len(lat)/2], "p50-ms")
			b.ReportMetric(lat[len(lat)*99/100], "p99-ms")
			b.ReportMetric(wall/float64(b.N), "s-all-running")
			b.ReportMetric(sending/float64(b.N), "s-sending")
			b.ReportMetric(writes/float64(b.N*n), "writes/pod")
			b.ReportMetric(reads/float64(b.N*n), "reads/pod")
		})
	}
}
