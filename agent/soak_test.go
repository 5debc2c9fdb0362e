package agent

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/reltable"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

// soakMethods are every method of the in-memory runtime that can fail.
var soakMethods = []string{"Version", "Status", "GetPods", "GetPodStatus", "SyncPod", "KillPod",
	"GarbageCollect", "PullImage", "ListImages", "RemoveImage", "WatchContainerEvents", "ExecSync",
	"CreatePodSandbox", "StartContainer", "StopContainer"}

// soakCycles is the number of pod create/update/delete cycles:
// NODEKIT_SOAK=1 runs the long soak (10,000), NODEKIT_SOAK=<n> runs n.
func soakCycles(t *testing.T) int {
	switch v := os.Getenv("NODEKIT_SOAK"); v {
	case "":
		return 200
	case "1":
		return 10000
	default:
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("NODEKIT_SOAK=%q: want 1 or a number of cycles", v)
		}
		return n
	}
}

// liveHeap is the live heap after a full collection.
func liveHeap() uint64 {
	var ms goruntime.MemStats
	goruntime.GC()
	goruntime.GC()
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// within5 reports whether got is at most 5 % above base.
func within5(got, base uint64) bool { return float64(got) <= float64(base)*1.05 }

// Pods are created, updated (a new image, so the container is replaced)
// and deleted in rounds of 200 through the agent, while 10 % of the calls
// of every runtime method fail (seeded). Each step must converge: the API
// status Running with the image asked for, one container running; deleted
// pods gone from the agent with nothing of theirs running. Between rounds
// the test garbage-collects the runtime as the kubelet's GC would, and
// afterwards nothing of any pod may be left on it. Goroutines and the live
// heap must come back within 5 % of their baseline, taken after
// warm-up rounds (three for the long soak, one for the short).
func TestSoakChurnWithRuntimeFaults(t *testing.T) {
	cycles := soakCycles(t)
	if os.Getenv("NODEKIT_SOAK_PROFILES") != "" { // heap profiles at the baseline and after the churn
		goruntime.MemProfileRate = 1
	}
	const batch = 200
	rates := map[string]float64{}
	for _, m := range soakMethods {
		rates[m] = 0.1
	}
	frt, err := fake.New(fake.Config{Seed: 20, FailureRates: rates,
		ImagePullBackoffInitial: 20 * time.Millisecond, ImagePullBackoffMax: 80 * time.Millisecond,
		// The fake's call record is the test's instrumentation, not the
		// agent's memory: keep it out of the measurement.
		MaxRecordedCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	rt := &faultCounter{Runtime: frt}
	c := fastConfig(rt)
	c.MaxPods = batch
	c.TerminateOnExit = true
	c.ShutdownTimeout = 20 * time.Second
	r := start(t, c)
	ctx := context.Background()

	gen := 0
	round := func(n int) {
		pods := make([]*v1.Pod, n)
		for i := range pods {
			pods[i] = newPod(fmt.Sprintf("soak-%d-%d", gen, i), v1.RestartPolicyAlways, "c")
		}
		gen++
		r.set(pods...)
		t.Logf("round %d: create %v", gen, time.Now().Format("05.000"))
		waitSoak(t, r, pods, "")
		t.Logf("round %d: update %v", gen, time.Now().Format("05.000"))

		updated := make([]*v1.Pod, n)
		for i, p := range pods {
			u := p.DeepCopy()
			u.Spec.Containers[0].Image = "img-c:v2"
			updated[i] = u
		}
		r.set(updated...)
		waitSoak(t, r, updated, "img-c:v2")
		t.Logf("round %d: delete %v", gen, time.Now().Format("05.000"))
		running := runningPods(t, rt)
		for _, p := range updated {
			if running[p.UID] != 1 {
				t.Fatalf("updated pod %s runs %d containers, want 1", p.Name, running[p.UID])
			}
		}

		r.set()
		waitFor(t, "deleted pods gone from the agent and the runtime", func() bool {
			if len(r.a.Pods()) != 0 {
				return false
			}
			listed := runningPods(t, rt)
			for _, p := range updated {
				if _, ok := listed[p.UID]; ok {
					return false
				}
			}
			return true
		})
		waitFor(t, "the runtime garbage-collected", func() bool {
			if err := rt.GarbageCollect(ctx, runtime.GCPolicy{}, true); err != nil {
				return false
			}
			all, err := rt.GetPods(ctx, true)
			return err == nil && len(all) == 0
		})
		frt.ResetCalls() // the fake records every kill; keep that out of the heap measured
	}

	// Warm-up: maps keep the buckets their peak needed, and deletions
	// leave tombstones until a map is rehashed; three rounds let that
	// settle (a 2,000-cycle run with heap profiles shows no growth after).
	// The short soak, in the normal suite, keeps to one.
	warm := 1
	if cycles >= 2000 {
		warm = 3
	}
	for range warm {
		round(batch)
	}
	settle := func() (int, uint64) {
		// Workers of deleted pods and the status manager finish on their
		// own; give them a moment before measuring.
		deadline := time.Now().Add(10 * time.Second)
		for {
			g, h := goruntime.NumGoroutine(), liveHeap()
			if time.Now().After(deadline) {
				return g, h
			}
			time.Sleep(100 * time.Millisecond)
			if g2, h2 := goruntime.NumGoroutine(), liveHeap(); g2 == g && within5(h2, h) {
				return g2, h2
			}
		}
	}
	baseG, baseH := settle()
	writeHeap := func(name string) {
		if dir := os.Getenv("NODEKIT_SOAK_PROFILES"); dir != "" {
			f, err := os.Create(dir + "/" + name)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := pprof.WriteHeapProfile(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeHeap("heap-base.pprof")

	start := time.Now()
	for done := 0; done < cycles; done += batch {
		round(min(batch, cycles-done))
	}
	elapsed := time.Since(start)

	var g int
	var h uint64
	deadline := time.Now().Add(20 * time.Second)
	for {
		g, h = goruntime.NumGoroutine(), liveHeap()
		if (float64(g) <= float64(baseG)*1.05 && within5(h, baseH)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	writeHeap("heap-after.pprof")
	faults := rt.injected()
	t.Logf("%d cycles in %v, %d injected faults; goroutines %d → %d, live heap %d → %d bytes",
		cycles, elapsed.Round(time.Millisecond), faults, baseG, g, baseH, h)
	if float64(g) > float64(baseG)*1.05 {
		t.Errorf("goroutines %d after the churn, baseline %d: more than 5 %% above", g, baseG)
	}
	if !within5(h, baseH) {
		t.Errorf("live heap %d bytes after the churn, baseline %d: more than 5 %% above", h, baseH)
	}
	if faults == 0 {
		t.Fatal("no fault was injected")
	}

	r.stop()
	for m := range rates {
		if err := frt.SetFailureRate(m, 0); err != nil {
			t.Fatal(err)
		}
	}
	all, err := rt.GetPods(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 0 {
		t.Fatalf("%d pods left on the runtime after shutdown", len(all))
	}
	if t.Failed() {
		return
	}
	run := "go test -run Soak -v ./agent"
	if cycles >= 10000 {
		run = "NODEKIT_SOAK=1 go test -run Soak -v ./agent"
	}
	reltable.Print(t, reltable.Row{
		Test: "agent: TestSoakChurnWithRuntimeFaults",
		Done: fmt.Sprintf("%d pod create/update (new image)/delete cycles through the agent in rounds of %d; 10 %% of every in-memory runtime method fails (seed 20)", cycles, batch),
		Held: fmt.Sprintf("every step converged despite %d injected faults; 0 sandboxes or containers left; goroutines %d → %d; live heap %.2f → %.2f MiB (%+.1f %%); took %v",
			faults, baseG, g, float64(baseH)/(1<<20), float64(h)/(1<<20), 100*(float64(h)/float64(baseH)-1), elapsed.Round(time.Second)),
		Run: run,
	})
}

// waitSoak waits until every pod is Running in its API status with its one
// container running image (any, if empty); on a timeout it reports the
// first pod that did not get there.
func waitSoak(t *testing.T, r *running, pods []*v1.Pod, image string) {
	t.Helper()
	ok := func(p *v1.Pod) bool {
		st, ok := r.a.status.GetPodStatus(p.UID)
		return ok && st.Phase == v1.PodRunning && len(st.ContainerStatuses) == 1 &&
			(image == "" || st.ContainerStatuses[0].Image == image) && st.ContainerStatuses[0].State.Running != nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for next := 0; next < len(pods); {
		if ok(pods[next]) {
			next++
			continue
		}
		if time.Now().After(deadline) {
			st, _ := r.a.status.GetPodStatus(pods[next].UID)
			rs, err := r.a.cfg.Runtime.GetPodStatus(context.Background(), pods[next].UID, "", "")
			t.Fatalf("pod %s did not converge (image %q): API status %+v; runtime status %+v (%v)", pods[next].Name, image, st, rs, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
