package runtime

import (
	"context"
	"io"
	"net/url"

	v1 "k8s.io/api/core/v1"
)

// TermSize is a terminal's size in characters, as a resize message of the
// remotecommand protocols carries it.
type TermSize struct {
	Width, Height uint16
}

// AttachIO are the streams of an exec or attach session, as the client
// asked for them: a nil Stdin, Stdout or Stderr was not asked for. With TTY,
// stderr is merged into stdout (Stderr is nil) and Resize delivers the
// terminal's size changes until the session ends; it is nil without TTY.
// The runtime closes nothing: the caller closes the streams after the call
// returns.
type AttachIO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	Resize         <-chan TermSize
}

// ContainerStreamer is implemented by runtimes that run exec and attach
// sessions themselves, in process (runtime/fake, a virtual-kubelet
// provider): the kubelet API (package server) speaks the remotecommand
// protocols to the client and hands the streams here.
type ContainerStreamer interface {
	// Exec runs cmd in the running container id of pod until it exits or
	// ctx ends. A non-zero exit is an error that implements k8s.io/utils/exec's
	// ExitError (ExitStatus() int), as the kubelet's streaming runtime
	// reports it; a container that does not exist wraps ErrNotFound.
	Exec(ctx context.Context, pod *v1.Pod, id ContainerID, cmd []string, streams AttachIO) error
	// Attach connects the streams to the running container id of pod (its
	// stdin if the spec has stdin, its output from now on) until ctx ends
	// or the container exits.
	Attach(ctx context.Context, pod *v1.Pod, id ContainerID, streams AttachIO) error
}

// PortForwarder is implemented by runtimes that forward a pod's ports in
// process (runtime/fake, a virtual-kubelet provider).
type PortForwarder interface {
	// PortForward copies stream to and from port of pod (a TCP port in its
	// network namespace) until either side closes or ctx ends. A pod that
	// does not listen there gives an error.
	PortForward(ctx context.Context, pod *v1.Pod, port int32, stream io.ReadWriteCloser) error
}

// ExecRequest is an exec or attach request for a StreamURLer; Cmd is empty
// for attach.
type ExecRequest struct {
	ContainerID ContainerID
	Cmd         []string
	Stdin       bool
	Stdout      bool
	Stderr      bool
	TTY         bool
}

// StreamURLer is implemented by runtimes that serve exec, attach and port
// forwarding on a streaming server of their own, as a CRI runtime does
// (the CRI's Exec, Attach and PortForward calls): the kubelet API proxies
// the client's upgraded connection to the URL returned, protocol and all.
type StreamURLer interface {
	// GetExecURL returns the URL of an exec session of req.Cmd.
	GetExecURL(ctx context.Context, pod *v1.Pod, req ExecRequest) (*url.URL, error)
	// GetAttachURL returns the URL of an attach session.
	GetAttachURL(ctx context.Context, pod *v1.Pod, req ExecRequest) (*url.URL, error)
	// GetPortForwardURL returns the URL of a port-forward session to
	// ports of the pod's sandbox sandboxID.
	GetPortForwardURL(ctx context.Context, pod *v1.Pod, sandboxID string, ports []int32) (*url.URL, error)
}
