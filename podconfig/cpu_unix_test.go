//go:build unix

package podconfig

import (
	"syscall"
	"time"
)

// cpuNow is the process's CPU time (user+system, all threads). The
// benchmarks report it per op next to wall time, since wall time on a shared
// machine also counts time spent waiting for a CPU.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
