package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	kubelet "github.com/nodekit/nodekit/bench/internal/kubeletpodworkers"
	"github.com/nodekit/nodekit/podworkers"
	nkruntime "github.com/nodekit/nodekit/runtime"
)

// Both sides: N new pods handed to UpdatePod, measured until each has been
// synced once by a syncer that does nothing; the cache answers at once and
// requeues are dropped. Tearing the workers down is not measured.

// counter signals when n calls were counted.
type counter struct {
	n     int64
	count atomic.Int64
	done  chan struct{}
}

func newCounter(n int) *counter { return &counter{n: int64(n), done: make(chan struct{})} }

func (c *counter) add() {
	if c.count.Add(1) == c.n {
		close(c.done)
	}
}

type kubeletSyncer struct{ synced, terminated *counter }

func (s *kubeletSyncer) SyncPod(context.Context, kubetypes.SyncPodType, *v1.Pod, *v1.Pod, *kubecontainer.PodStatus) (bool, func(), error) {
	s.synced.add()
	return false, nil, nil
}
func (s *kubeletSyncer) SyncTerminatingPod(context.Context, *v1.Pod, *kubecontainer.PodStatus, *int64, func(*v1.PodStatus)) error {
	return nil
}
func (s *kubeletSyncer) SyncTerminatingRuntimePod(context.Context, *kubecontainer.Pod) error {
	return nil
}
func (s *kubeletSyncer) SyncTerminatedPod(context.Context, *v1.Pod, *kubecontainer.PodStatus) error {
	s.terminated.add()
	return nil
}

var kubeletStatus = &kubecontainer.PodStatus{}

type kubeletCache struct{}

func (kubeletCache) Get(types.UID) (*kubecontainer.PodStatus, error) { return kubeletStatus, nil }
func (kubeletCache) GetNewerThan(types.UID, time.Time) (*kubecontainer.PodStatus, error) {
	return kubeletStatus, nil
}

type kubeletQueue struct{}

func (kubeletQueue) GetWork() []types.UID             { return nil }
func (kubeletQueue) Enqueue(types.UID, time.Duration) {}

// noAllocation answers as the kubelet's allocation manager does for a pod
// without a stored allocation, without its lookup.
type noAllocation struct{ allocation.Manager }

func (noAllocation) UpdatePodFromAllocation(pod *v1.Pod) (*v1.Pod, bool) { return pod, false }

func kubeletWorkersRound(n int) func(b *testing.B) {
	pods := workerPods(n)
	return func(b *testing.B) {
		m := newMeter(b)
		defer m.done()
		ctx := context.Background()
		logger := klog.Background()
		for i := 0; i < b.N; i++ {
			m.stop()
			s := &kubeletSyncer{synced: newCounter(n), terminated: newCounter(n)}
			w := kubelet.NewPodWorkers(s, kubeletQueue{}, kubeletCache{}, noAllocation{})
			m.start()
			for _, pod := range pods {
				w.UpdatePod(ctx, kubelet.UpdatePodOptions{UpdateType: kubetypes.SyncPodCreate, Pod: pod})
			}
			<-s.synced.done
			m.stop()
			// Tear down: kill every pod, then forget the finished
			// workers, which ends their goroutines.
			for _, pod := range pods {
				w.UpdatePod(ctx, kubelet.UpdatePodOptions{UpdateType: kubetypes.SyncPodKill, Pod: pod})
			}
			<-s.terminated.done
			for len(w.SyncKnownPods(logger, nil)) > 0 {
				time.Sleep(time.Millisecond)
			}
			m.start()
		}
	}
}

type nodekitSyncer struct{ synced *counter }

func (s *nodekitSyncer) SyncPod(context.Context, podworkers.UpdateType, *v1.Pod, *v1.Pod, *nkruntime.PodStatus) (bool, error) {
	s.synced.add()
	return false, nil
}
func (s *nodekitSyncer) SyncTerminatingPod(context.Context, *v1.Pod, *nkruntime.PodStatus, *int64, func(*v1.PodStatus)) error {
	return nil
}
func (s *nodekitSyncer) SyncTerminatingRuntimePod(context.Context, *nkruntime.Pod) error { return nil }
func (s *nodekitSyncer) SyncTerminatedPod(context.Context, *v1.Pod, *nkruntime.PodStatus) error {
	return nil
}

var nodekitStatus = &nkruntime.PodStatus{}

type nodekitCache struct{ nkruntime.Cache }

func (nodekitCache) GetNewerThan(context.Context, types.UID, time.Time) (*nkruntime.PodStatus, error) {
	return nodekitStatus, nil
}
func (nodekitCache) Get(types.UID) (*nkruntime.PodStatus, error) { return nodekitStatus, nil }

type nodekitQueue struct{}

func (nodekitQueue) Enqueue(types.UID, time.Duration) {}

func nodekitWorkersRound(n int) func(b *testing.B) {
	pods := workerPods(n)
	return func(b *testing.B) {
		m := newMeter(b)
		defer m.done()
		for i := 0; i < b.N; i++ {
			m.stop()
			s := &nodekitSyncer{synced: newCounter(n)}
			p, err := podworkers.New(podworkers.Config{Syncer: s, Cache: nodekitCache{}, ResyncQueue: nodekitQueue{}})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan struct{})
			go func() { _ = p.Run(ctx); close(ran) }()
			m.start()
			for _, pod := range pods {
				if err := p.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod}); err != nil {
					b.Fatal(err)
				}
			}
			<-s.synced.done
			m.stop()
			cancel()
			<-ran
			m.start()
		}
	}
}
