//go:build !unix

package prober

import (
	"net"
	"time"
)

func probeDialer(timeout time.Duration) *net.Dialer { return &net.Dialer{Timeout: timeout} }
