package podworkers_test

import (
	"context"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/podworkers/podworkerstest"
	"github.com/nodekit/nodekit/runtime"
)

// gateSyncer's SyncPod blocks the pods in block until gate is closed (or
// the sync is cancelled), and records how many syncs of a pod ran at once.
type gateSyncer struct {
	block map[types.UID]bool
	gate  chan struct{}

	mu      sync.Mutex
	started map[types.UID]int
	in      map[types.UID]int
	most    int // syncs of one pod in flight at once, at most
}

func newGateSyncer(block ...types.UID) *gateSyncer {
	s := &gateSyncer{block: map[types.UID]bool{}, gate: make(chan struct{}),
		started: map[types.UID]int{}, in: map[types.UID]int{}}
	for _, uid := range block {
		s.block[uid] = true
	}
	return s
}

func (s *gateSyncer) SyncPod(ctx context.Context, _ podworkers.UpdateType, pod, _ *v1.Pod, _ *runtime.PodStatus) (bool, error) {
	s.mu.Lock()
	s.started[pod.UID]++
	s.in[pod.UID]++
	s.most = max(s.most, s.in[pod.UID])
	s.mu.Unlock()
	if s.block[pod.UID] {
		select {
		case <-s.gate:
		case <-ctx.Done():
		}
	}
	s.mu.Lock()
	s.in[pod.UID]--
	s.mu.Unlock()
	return false, nil
}

func (s *gateSyncer) SyncTerminatingPod(context.Context, *v1.Pod, *runtime.PodStatus, *int64, func(*v1.PodStatus)) error {
	return nil
}
func (s *gateSyncer) SyncTerminatingRuntimePod(context.Context, *runtime.Pod) error { return nil }
func (s *gateSyncer) SyncTerminatedPod(context.Context, *v1.Pod, *runtime.PodStatus) error {
	return nil
}

// counts returns how many pods' syncs started, how many are in flight, and
// the most syncs of one pod in flight at once.
func (s *gateSyncer) counts() (started, inFlight, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.in {
		inFlight += n
	}
	return len(s.started), inFlight, s.most
}

// runWorkers runs PodWorkers over s until the test ends.
func runWorkers(t *testing.T, s podworkers.PodSyncer, holds *podworkers.Holds) *podworkers.PodWorkers {
	t.Helper()
	p, err := podworkers.New(podworkers.Config{Syncer: s, Cache: podworkerstest.NewCache(), ResyncQueue: discardQueue{}})
	if err != nil {
		t.Fatal(err)
	}
	if holds != nil {
		p.InstallHolds(holds)
	}
	runUntilCleanup(t, p)
	return p
}

func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestQuickSyncsShareWorkerGoroutines(t *testing.T) {
	const n = 1000
	s := &nopSyncer{n: n, done: make(chan struct{})}
	p := runWorkers(t, s, nil)
	before := goroutinesCreated()
	for i := range n {
		if err := p.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate,
			Pod: newNamedPod("uid-"+strconv.Itoa(i), "ns", "pod-"+strconv.Itoa(i), false)}); err != nil {
			t.Fatal(err)
		}
	}
	<-s.done
	// A goroutine per pod would be n; the workers' goroutines take the
	// next queued pod once done with one.
	if created := goroutinesCreated() - before; created > n/4 {
		t.Errorf("%d pods with quick syncs started %d goroutines, want far fewer", n, created)
	}
}

func TestPodsWhoseSyncBlocksHoldNoOtherPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 500
		var blocked []types.UID
		for i := 0; i < n; i += 10 {
			blocked = append(blocked, types.UID("uid-"+strconv.Itoa(i)))
		}
		s := newGateSyncer(blocked...)
		p := runWorkers(t, s, nil)
		for i := range n {
			if err := p.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate,
				Pod: newNamedPod("uid-"+strconv.Itoa(i), "ns", "pod-"+strconv.Itoa(i), false)}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if started, inFlight, _ := s.counts(); started != n || inFlight != len(blocked) {
			t.Errorf("%d of %d pods synced with %d syncs in flight, want all with %d blocked", started, n, inFlight, len(blocked))
		}
		close(s.gate)
		synctest.Wait()
		if _, inFlight, _ := s.counts(); inFlight != 0 {
			t.Errorf("%d syncs in flight after the gate opened", inFlight)
		}
	})
}

// A pod forgotten before its worker started, then created again with the
// same UID: the first worker, late, must leave the new instance to its own
// worker. Were it to take the new instance for its own, it would mark it
// idle while that worker syncs, and the next update would start a second
// sync of the pod at the same time.
func TestALateWorkerOfAForgottenPodLeavesTheNewInstanceAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const uid = "a"
		s := newGateSyncer(uid)
		holds := &podworkers.Holds{}
		p := runWorkers(t, s, holds)
		pod := newNamedPod(uid, "ns", "a", false)
		create := func(typ podworkers.UpdateType) {
			if err := p.UpdatePod(podworkers.UpdatePodOptions{UpdateType: typ, Pod: pod}); err != nil {
				t.Fatal(err)
			}
		}

		arrived := holds.HoldFirst(uid)
		create(podworkers.SyncPodCreate)
		<-arrived // its worker holds before taking the update
		p.SyncKnownPods(nil)
		if st := p.Status(uid); st != nil {
			t.Fatalf("a pod neither desired nor started is still known: %+v", st)
		}
		create(podworkers.SyncPodCreate)
		synctest.Wait()
		if _, inFlight, _ := s.counts(); inFlight != 1 {
			t.Fatalf("the new instance is not syncing: %d syncs in flight", inFlight)
		}

		holds.Release(uid)
		synctest.Wait()
		if st := p.Status(uid); st == nil || !st.Working {
			t.Errorf("the late worker stopped the new instance's worker: %+v", st)
		}
		create(podworkers.SyncPodUpdate)
		synctest.Wait()
		if _, _, most := s.counts(); most != 1 {
			t.Errorf("%d syncs of the pod ran at once, want 1", most)
		}
		close(s.gate)
		synctest.Wait()
	})
}
