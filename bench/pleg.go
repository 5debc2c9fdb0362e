package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	containertest "k8s.io/kubernetes/pkg/kubelet/container/testing"
	kpleg "k8s.io/kubernetes/pkg/kubelet/pleg"

	"github.com/nodekit/nodekit/pleg"
	nkruntime "github.com/nodekit/nodekit/runtime"
)

// Both PLEGs see n pods of two running containers each, listed and
// inspected from prebuilt values without allocating, so that only the PLEG
// is measured.

type kubeletRuntime struct {
	*containertest.FakeRuntime
	pods     []*kubecontainer.Pod
	statuses map[types.UID]*kubecontainer.PodStatus
}

func (r *kubeletRuntime) GetPods(context.Context, bool) ([]*kubecontainer.Pod, error) {
	return r.pods, nil
}

func (r *kubeletRuntime) GetPodStatus(_ context.Context, pod *kubecontainer.Pod) (*kubecontainer.PodStatus, error) {
	return r.statuses[pod.ID], nil
}

func newKubeletRuntime(n int) *kubeletRuntime {
	r := &kubeletRuntime{FakeRuntime: &containertest.FakeRuntime{}, statuses: make(map[types.UID]*kubecontainer.PodStatus, n)}
	for i := 0; i < n; i++ {
		uid := types.UID(fmt.Sprintf("pod-%06d", i))
		p := &kubecontainer.Pod{ID: uid, Name: "pod-" + string(uid), Namespace: "ns"}
		s := &kubecontainer.PodStatus{ID: uid, Name: p.Name, Namespace: p.Namespace}
		for _, c := range []string{"a", "b"} {
			id := kubecontainer.ContainerID{Type: "fake", ID: string(uid) + "-" + c}
			p.Containers = append(p.Containers, &kubecontainer.Container{ID: id, Name: string(uid) + "-" + c, State: kubecontainer.ContainerStateRunning})
			s.ContainerStatuses = append(s.ContainerStatuses, &kubecontainer.Status{ID: id, Name: string(uid) + "-" + c, State: kubecontainer.ContainerStateRunning})
		}
		r.pods = append(r.pods, p)
		r.statuses[uid] = s
	}
	return r
}

type nodekitLister struct {
	pods     []*nkruntime.Pod
	statuses map[types.UID]*nkruntime.PodStatus
}

func (l *nodekitLister) GetPods(context.Context, bool) ([]*nkruntime.Pod, error) { return l.pods, nil }

func (l *nodekitLister) GetPodStatus(_ context.Context, uid types.UID, _, _ string) (*nkruntime.PodStatus, error) {
	return l.statuses[uid], nil
}

func newNodekitLister(n int) *nodekitLister {
	l := &nodekitLister{statuses: make(map[types.UID]*nkruntime.PodStatus, n)}
	for i := 0; i < n; i++ {
		uid := types.UID(fmt.Sprintf("pod-%06d", i))
		p := &nkruntime.Pod{ID: uid, Name: "pod-" + string(uid), Namespace: "ns"}
		s := &nkruntime.PodStatus{ID: uid, Name: p.Name, Namespace: p.Namespace}
		for _, c := range []string{"a", "b"} {
			id := nkruntime.ContainerID{Type: "fake", ID: string(uid) + "-" + c}
			p.Containers = append(p.Containers, &nkruntime.Container{ID: id, Name: string(uid) + "-" + c, State: nkruntime.ContainerStateRunning})
			s.ContainerStatuses = append(s.ContainerStatuses, &nkruntime.ContainerStatus{ID: id, Name: string(uid) + "-" + c, State: nkruntime.ContainerStateRunning})
		}
		l.pods = append(l.pods, p)
		l.statuses[uid] = s
	}
	return l
}

func newKubeletPLEG(rt *kubeletRuntime, n int) (*kpleg.GenericPLEG, chan *kpleg.PodLifecycleEvent) {
	ch := make(chan *kpleg.PodLifecycleEvent, 3*n)
	g := kpleg.NewGenericPLEG(rt, ch, &kpleg.RelistDuration{RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute},
		kubecontainer.NewCache(), clock.RealClock{})
	return g.(*kpleg.GenericPLEG), ch
}

func newNodekitPLEG(b *testing.B, l *nodekitLister, n, parallelism int) *pleg.GenericPLEG {
	g, err := pleg.New(pleg.Config{Runtime: l, Cache: nkruntime.NewCache(), Clock: clock.RealClock{},
		EventChannelCapacity: 3 * n, InspectParallelism: parallelism})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func kubeletRelistFirst(n int) func(b *testing.B) {
	rt := newKubeletRuntime(n)
	return func(b *testing.B) {
		m := newMeter(b)
		defer m.done()
		ctx := context.Background()
		for i := 0; i < b.N; i++ {
			m.stop()
			g, ch := newKubeletPLEG(rt, n)
			m.start()
			g.Relist(ctx)
			if len(ch) != 2*n {
				b.Fatalf("kubelet: %d events, want %d", len(ch), 2*n)
			}
		}
	}
}

func nodekitRelistFirst(parallelism int) func(n int) func(b *testing.B) {
	return func(n int) func(b *testing.B) {
		l := newNodekitLister(n)
		return func(b *testing.B) {
			m := newMeter(b)
			defer m.done()
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				m.stop()
				g := newNodekitPLEG(b, l, n, parallelism)
				m.start()
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
				if len(g.Watch()) != 2*n {
					b.Fatalf("nodekit: %d events, want %d", len(g.Watch()), 2*n)
				}
			}
		}
	}
}

func kubeletRelistSteady(n int) func(b *testing.B) {
	rt := newKubeletRuntime(n)
	return func(b *testing.B) {
		m := newMeter(b)
		defer m.done()
		ctx := context.Background()
		g, ch := newKubeletPLEG(rt, n)
		g.Relist(ctx)
		for len(ch) > 0 {
			<-ch
		}
		m.reset()
		for i := 0; i < b.N; i++ {
			g.Relist(ctx)
		}
		if len(ch) != 0 {
			b.Fatal("kubelet: steady relist sent events")
		}
	}
}

func nodekitRelistSteady(n int) func(b *testing.B) {
	l := newNodekitLister(n)
	return func(b *testing.B) {
		m := newMeter(b)
		defer m.done()
		ctx := context.Background()
		g := newNodekitPLEG(b, l, n, 0)
		if err := g.Relist(ctx); err != nil {
			b.Fatal(err)
		}
		for len(g.Watch()) > 0 {
			<-g.Watch()
		}
		m.reset()
		for i := 0; i < b.N; i++ {
			if err := g.Relist(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if len(g.Watch()) != 0 {
			b.Fatal("nodekit: steady relist sent events")
		}
	}
}
