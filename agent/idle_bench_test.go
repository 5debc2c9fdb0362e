package agent

import (
	"context"
	"flag"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/status/statustest"
)

var (
	idleNodes   = flag.Int("idle.nodes", 1000, "agents of BenchmarkIdleAgents")
	idleProfile = flag.String("idle.heapprofile", "", "BenchmarkIdleAgents writes a heap profile of the idle agents here (inuse_space)")
	idleGoProf  = flag.String("idle.goroutineprofile", "", "BenchmarkIdleAgents writes a goroutine profile of the idle agents here")
	idleGCs     = flag.Int("idle.gcs", 2, "collections before BenchmarkIdleAgents reads memory (each may halve an idle goroutine's grown stack)")
	// 64 is what examples/simnodes sets; 0 is the agent's default.
	idleCapacity = flag.Int("idle.plegcapacity", 64, "Config.PLEGEventCapacity of BenchmarkIdleAgents' agents")
)

// liveMemory is heap and goroutine stacks in use after two collections.
func liveMemory() (heap, stack uint64) {
	for range *idleGCs {
		goruntime.GC()
	}
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapInuse, ms.StackInuse
}

// BenchmarkIdleAgents runs -idle.nodes agents configured as
// examples/simnodes runs them (an apiserver source, the node controllers
// with their Lease, runtime/fake, the real clock), each registered and
// idle without pods, and reports what one idle node costs: heap and
// stacks in use and goroutines, per node. One op is the whole set, from
// New to registered; B/op is what building and starting them allocated.
// -idle.heapprofile and -idle.goroutineprofile write profiles of the idle
// set, for finding what a node holds:
//
//	go test -run '^$' -bench IdleAgents -benchtime 1x ./agent -idle.heapprofile heap.out
func BenchmarkIdleAgents(b *testing.B) {
	n := *idleNodes
	if *idleProfile != "" {
		defer func(rate int) { goruntime.MemProfileRate = rate }(goruntime.MemProfileRate)
		goruntime.MemProfileRate = 1 // every allocation, for a profile of small ones
	}
	for range b.N {
		b.StopTimer()
		heap0, stack0 := liveMemory()
		g0 := goruntime.NumGoroutine()
		api, pods := nodetest.New(), statustest.New()
		b.StartTimer()
		agents := make([]*Agent, n)
		for i := range agents {
			rt, err := fake.New(fake.Config{MaxRecordedCalls: -1}) // as simnodes'
			if err != nil {
				b.Fatal(err)
			}
			a, err := New(Config{
				NodeName:     fmt.Sprintf("node-%04d", i),
				Runtime:      rt,
				Sources:      []string{podutil.ApiserverSource},
				StatusClient: func(ns string) status.PodClient { return pods.Pods(ns) },
				NodeIPs:      []string{"192.0.2.10"},
				// No Node watch: simnodes' Nodes client is not a
				// node.NodeWatcher (one informer serves all nodes).
				Node:              &node.Config{Nodes: nodesOnly{api.Nodes()}, Leases: api.Leases(), KubeletPort: node.NoKubeletPort},
				PLEGEventCapacity: *idleCapacity,
			})
			if err != nil {
				b.Fatal(err)
			}
			agents[i] = a
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Go(func() {
				if err := a.Run(ctx); err != nil {
					b.Error(err)
				}
			})
			// As simnodes: Send, which needs no forwarder of the agent's.
			if err := a.Send(ctx, podutil.ApiserverSource, podconfig.PodUpdate{Op: podconfig.SET}); err != nil {
				b.Fatal(err)
			}
		}
		for _, a := range agents {
			<-a.Node().Registered()
		}
		b.StopTimer()
		// Idle: past the first relists, status reports and Lease renewal.
		time.Sleep(2 * time.Second)
		api.ClearActions()
		heap, stack := liveMemory()
		g := goruntime.NumGoroutine()
		writeProfile(b, *idleProfile, "heap")
		writeProfile(b, *idleGoProf, "goroutine")
		cancel()
		wg.Wait()

		b.ReportMetric(float64(heap-heap0)/float64(n)/1024, "heap-KiB/node")
		b.ReportMetric(float64(stack-stack0)/float64(n)/1024, "stack-KiB/node")
		b.ReportMetric(float64(g-g0)/float64(n), "goroutines/node")
		if *idleGCs > 2 {
			sm := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
			metrics.Read(sm)
			b.ReportMetric(float64(sm[0].Value.Uint64()), "start-stack-B")
		}
		b.StartTimer()
	}
}

func writeProfile(b *testing.B, path, name string) {
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// nodesOnly hides the fake's Watch: a node.NodeClient and nothing more.
type nodesOnly struct{ node.NodeClient }
