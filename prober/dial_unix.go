//go:build unix

package prober

import (
	"net"
	"syscall"
	"time"
)

// probeDialer closes connections with a 1s linger, as the kubelet's probe
// dialer, so frequent probes do not pile up sockets in TIME_WAIT.
func probeDialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
		})
	}}
}
