package sim

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

var idleTestSink [][]byte

// A goroutine in runtime.GC waits for the cycle, blocked as the scheduler
// counts it, and goes on when the cycle ends with no other goroutine's
// help, as one that parked to assist the collector does: the probe must
// not call the process idle meanwhile (it did in about 1 try in 10, and
// a cluster stepped its clock while such goroutines had work left).
func TestIdleProbeWaitsOutAGarbageCollection(t *testing.T) {
	p := newIdleProbe()
	early := 0
	const tries = 100
	for i := range tries {
		for range 200 { // a heap worth collecting
			idleTestSink = append(idleTestSink, make([]byte, 4096))
		}
		if i%10 == 0 {
			idleTestSink = nil
		}
		var done atomic.Bool
		go func() { runtime.GC(); done.Store(true) }()
		if !p.wait(context.Background(), 10*time.Second) {
			t.Fatal("never idle")
		}
		if !done.Load() {
			early++
		}
		for !done.Load() {
			runtime.Gosched()
		}
	}
	idleTestSink = nil
	if early > 0 {
		t.Errorf("idle while a garbage collection ran, in %d of %d tries", early, tries)
	}
}

// A process with nothing to do is idle.
func TestIdleProbeSeesAnIdleProcess(t *testing.T) {
	if !newIdleProbe().wait(context.Background(), 10*time.Second) {
		t.Fatal("not idle")
	}
}
