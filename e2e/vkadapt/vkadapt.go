// Package vkadapt gives a virtual-kubelet provider's container logs, exec
// and attach the method sets nodekit's provider.Runtime looks for
// (provider.ContainerLogsProvider, ContainerExecProvider,
// ContainerAttachProvider). Those name nodekit's types (v1.PodLogOptions,
// runtime.AttachIO) where virtual-kubelet's name its own (api.ContainerLogOpts,
// api.AttachIO), which the nodekit library cannot import; this package
// may, and converts. A provider's PortForward needs nothing: it has
// provider.PortForwardProvider's method set as it is.
//
// A provider author adds three methods to the provider, each one line:
//
//	func (p *MyProvider) ContainerLogs(ctx context.Context, ns, pod, c string, o *v1.PodLogOptions) (io.ReadCloser, error) {
//		return vkadapt.ContainerLogs(ctx, p, ns, pod, c, o)
//	}
//	func (p *MyProvider) ExecInContainer(ctx context.Context, ns, pod, c string, cmd []string, s runtime.AttachIO) error {
//		return vkadapt.Exec(ctx, p, ns, pod, c, cmd, s)
//	}
//	func (p *MyProvider) AttachContainer(ctx context.Context, ns, pod, c string, s runtime.AttachIO) error {
//		return vkadapt.Attach(ctx, p, ns, pod, c, s)
//	}
//
// The package lives in nodekit's e2e module, which may import
// virtual-kubelet; it is small enough to copy into a provider's module.
package vkadapt

import (
	"context"
	"io"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// LogsProvider is virtual-kubelet's GetContainerLogs
// (api.ContainerLogsHandlerFunc).
type LogsProvider interface {
	GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error)
}

// ExecProvider is virtual-kubelet's RunInContainer
// (api.ContainerExecHandlerFunc).
type ExecProvider interface {
	RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error
}

// AttachProvider is virtual-kubelet's AttachToContainer
// (api.ContainerAttachHandlerFunc).
type AttachProvider interface {
	AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error
}

// LogOpts is virtual-kubelet's ContainerLogOpts of the kubelet API's log
// query, field for field as its api.HandleContainerLogs parses it; nil is
// no options.
func LogOpts(o *v1.PodLogOptions) api.ContainerLogOpts {
	var out api.ContainerLogOpts
	if o == nil {
		return out
	}
	out.Timestamps, out.Follow, out.Previous = o.Timestamps, o.Follow, o.Previous
	if o.TailLines != nil {
		out.Tail = int(*o.TailLines)
	}
	if o.LimitBytes != nil {
		out.LimitBytes = int(*o.LimitBytes)
	}
	if o.SinceSeconds != nil {
		out.SinceSeconds = int(*o.SinceSeconds)
	}
	if o.SinceTime != nil {
		out.SinceTime = o.SinceTime.Time
	}
	return out
}

// ContainerLogs calls p's GetContainerLogs with opts converted.
func ContainerLogs(ctx context.Context, p LogsProvider, namespace, pod, container string, opts *v1.PodLogOptions) (io.ReadCloser, error) {
	return p.GetContainerLogs(ctx, namespace, pod, container, LogOpts(opts))
}

// Exec calls p's RunInContainer with streams as an api.AttachIO; its
// error, an exit code say, is passed through.
func Exec(ctx context.Context, p ExecProvider, namespace, pod, container string, cmd []string, streams runtime.AttachIO) error {
	return WithAttachIO(ctx, streams, func(a api.AttachIO) error {
		return p.RunInContainer(ctx, namespace, pod, container, cmd, a)
	})
}

// Attach calls p's AttachToContainer with streams as an api.AttachIO.
func Attach(ctx context.Context, p AttachProvider, namespace, pod, container string, streams runtime.AttachIO) error {
	return WithAttachIO(ctx, streams, func(a api.AttachIO) error {
		return p.AttachToContainer(ctx, namespace, pod, container, a)
	})
}

// WithAttachIO calls fn with streams as virtual-kubelet's AttachIO: a
// stream the client did not ask for is nil, as virtual-kubelet gives it;
// Close on stdout or stderr does nothing (the server closes them after
// the session); with TTY, Resize delivers streams' resizes until fn
// returns, and is closed then.
func WithAttachIO(ctx context.Context, streams runtime.AttachIO, fn func(api.AttachIO) error) error {
	a := &attachIO{stdin: streams.Stdin, tty: streams.TTY}
	if streams.Stdout != nil {
		a.stdout = nopCloser{streams.Stdout}
	}
	if streams.Stderr != nil {
		a.stderr = nopCloser{streams.Stderr}
	}
	if !streams.TTY || streams.Resize == nil {
		return fn(a)
	}
	resize := make(chan api.TermSize)
	a.resize = resize
	done, forwarded := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(forwarded)
		defer close(resize)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case sz, ok := <-streams.Resize:
				if !ok {
					return
				}
				select {
				case resize <- api.TermSize{Width: sz.Width, Height: sz.Height}:
				case <-done:
					return
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	err := fn(a)
	close(done)
	<-forwarded
	return err
}

// attachIO is api.AttachIO over runtime.AttachIO.
type attachIO struct {
	stdin          io.Reader
	stdout, stderr io.WriteCloser
	tty            bool
	resize         <-chan api.TermSize
}

func (a *attachIO) Stdin() io.Reader            { return a.stdin }
func (a *attachIO) Stdout() io.WriteCloser      { return a.stdout }
func (a *attachIO) Stderr() io.WriteCloser      { return a.stderr }
func (a *attachIO) TTY() bool                   { return a.tty }
func (a *attachIO) Resize() <-chan api.TermSize { return a.resize }

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
