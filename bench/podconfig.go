package main

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	kconfig "k8s.io/kubernetes/pkg/kubelet/config"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"github.com/nodekit/nodekit/podconfig"
)

type nopSLI struct{}

func (nopSLI) ObservedPodOnWatch(klog.Logger, *v1.Pod, time.Time) {}

// kubeletSource is a source channel of the kubelet's PodConfig. Its element
// type is unexported, so the snapshot is built through reflection (one
// small allocation, outside the mux's work).
type kubeletSource struct{ ch reflect.Value }

func newKubeletPodConfig(ctx context.Context) (*kconfig.PodConfig, kubeletSource) {
	c := kconfig.NewPodConfig(&record.FakeRecorder{}, nopSLI{})
	return c, kubeletSource{reflect.ValueOf(c.Channel(ctx, kubetypes.ApiserverSource))}
}

// close ends the source: the kubelet's mux goroutine returns when its
// channel is closed, not when its context is cancelled, and would keep the
// PodConfig and its pods alive.
func (s kubeletSource) close() { s.ch.Close() }

func (s kubeletSource) set(pods []*v1.Pod) {
	u := reflect.New(s.ch.Type().Elem()).Elem()
	u.FieldByName("Pods").Set(reflect.ValueOf(pods))
	s.ch.Send(u)
}

func kubeletSet(n int) func(b *testing.B) {
	return func(b *testing.B) {
		m := newMeter(b)
		defer m.done()
		for i := 0; i < b.N; i++ {
			m.stop()
			ctx, cancel := context.WithCancel(context.Background())
			c, src := newKubeletPodConfig(ctx)
			pods := workloadPods(n, -1, "")
			runtime.GC()
			m.start()
			src.set(pods)
			if u := <-c.Updates(); u.Op != kubetypes.ADD || len(u.Pods) != n {
				b.Fatalf("kubelet: got %v with %d pods", u.Op, len(u.Pods))
			}
			m.stop()
			cancel()
			src.close()
			m.start()
		}
	}
}

func nodekitSet(copyPods bool) func(n int) func(b *testing.B) {
	return func(n int) func(b *testing.B) {
		return func(b *testing.B) {
			m := newMeter(b)
			defer m.done()
			for i := 0; i < b.N; i++ {
				m.stop()
				ctx, cancel := context.WithCancel(context.Background())
				c, err := podconfig.NewPodConfig(podconfig.Incremental, podconfig.Options{CopyPods: copyPods})
				if err != nil {
					b.Fatal(err)
				}
				ch := c.Channel(ctx, kubetypes.ApiserverSource)
				pods := workloadPods(n, -1, "")
				runtime.GC()
				m.start()
				ch <- podconfig.PodUpdate{Op: podconfig.SET, Pods: pods}
				if u := <-c.Updates(); u.Op != podconfig.ADD || len(u.Pods) != n {
					b.Fatalf("nodekit: got %v with %d pods", u.Op, len(u.Pods))
				}
				m.stop()
				cancel()
				m.start()
			}
		}
	}
}

func kubeletSetOneChanged(n int) func(b *testing.B) {
	return func(b *testing.B) {
		m := newMeter(b)
		defer m.done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c, src := newKubeletPodConfig(ctx)
		defer src.close()
		src.set(workloadPods(n, -1, ""))
		<-c.Updates()
		m.reset()
		for i := 0; i < b.N; i++ {
			m.stop()
			pods := workloadPods(n, n/2, fmt.Sprintf("registry.example.com/web:2.%d", i))
			runtime.GC()
			m.start()
			src.set(pods)
			if u := <-c.Updates(); u.Op != kubetypes.UPDATE || len(u.Pods) != 1 {
				b.Fatalf("kubelet: got %v with %d pods", u.Op, len(u.Pods))
			}
		}
	}
}

func nodekitSetOneChanged(n int) func(b *testing.B) {
	return func(b *testing.B) {
		m := newMeter(b)
		defer m.done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c, err := podconfig.NewPodConfig(podconfig.Incremental, podconfig.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ch := c.Channel(ctx, kubetypes.ApiserverSource)
		ch <- podconfig.PodUpdate{Op: podconfig.SET, Pods: workloadPods(n, -1, "")}
		<-c.Updates()
		// One unchanged SET takes the stored pods' fingerprints (at their
		// first comparison), so that the timed SETs are the steady state, as
		// the kubelet's are from the start; Sync waits for it.
		ch <- podconfig.PodUpdate{Op: podconfig.SET, Pods: workloadPods(n, -1, "")}
		if err := c.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		<-c.Updates()
		m.reset()
		for i := 0; i < b.N; i++ {
			m.stop()
			pods := workloadPods(n, n/2, fmt.Sprintf("registry.example.com/web:2.%d", i))
			runtime.GC()
			m.start()
			ch <- podconfig.PodUpdate{Op: podconfig.SET, Pods: pods}
			if u := <-c.Updates(); u.Op != podconfig.UPDATE || len(u.Pods) != 1 {
				b.Fatalf("nodekit: got %v with %d pods", u.Op, len(u.Pods))
			}
		}
	}
}
