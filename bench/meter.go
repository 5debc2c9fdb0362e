package main

import (
	"syscall"
	"testing"
	"time"
)

// meter follows a benchmark's timer and also adds up the process's CPU
// time (user and system, every thread: the mux's, workers' and GC's
// goroutines included) while it runs, reported as cpu-ns/op. On a shared
// machine CPU time varies far less than wall time.
type meter struct {
	b   *testing.B
	cpu time.Duration
	t0  time.Duration
}

func newMeter(b *testing.B) *meter { return &meter{b: b, t0: processCPU()} }

func (m *meter) stop() {
	m.b.StopTimer()
	m.cpu += processCPU() - m.t0
}

func (m *meter) start() {
	m.t0 = processCPU()
	m.b.StartTimer()
}

func (m *meter) reset() {
	m.b.ResetTimer()
	m.cpu, m.t0 = 0, processCPU()
}

func (m *meter) done() {
	m.stop()
	m.b.ReportMetric(float64(m.cpu.Nanoseconds())/float64(m.b.N), "cpu-ns/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
