package runtime

import (
	"context"
	"errors"
	"net"
	"time"
)

// ErrExecTimeout is wrapped by CommandRunner.ExecSync's error when the
// command ran past its timeout.
var ErrExecTimeout = errors.New("runtime: command timed out")

// CommandRunner is implemented by runtimes that can run a command inside a
// running container and wait for it, the CRI's ExecSync. The prober's exec
// probes use it; a runtime without it cannot run exec probes.
type CommandRunner interface {
	// ExecSync runs cmd in container id and returns its output and exit
	// code once it exits; a non-zero exit code is not an error. A command
	// still running after timeout (0: no limit) is abandoned and ExecSync
	// returns an error wrapping ErrExecTimeout; the runtime, not the
	// caller's ctx, enforces timeout. A container that does not exist gives
	// an error wrapping ErrNotFound.
	ExecSync(ctx context.Context, id ContainerID, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int, err error)
}

// PodDialer is implemented by runtimes whose pods are not on the host's
// network, such as runtime/fake's in-memory pods: it opens a connection to
// a pod's IP and port, which the agent's network probes (httpGet,
// tcpSocket, grpc) then use instead of the host's network.
type PodDialer interface {
	// DialPod connects to address ("ip:port") on network ("tcp"), bounded
	// by ctx. A pod that does not listen there gives an error, as a
	// refused connection.
	DialPod(ctx context.Context, network, address string) (net.Conn, error)
}
