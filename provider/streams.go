package provider

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// ContainerLogsProvider is a provider's container logs (virtual-kubelet's
// GetContainerLogs) over nodekit's types: virtual-kubelet's ContainerLogOpts
// is its own type, which this module cannot name, so the method has another
// name and a virtual-kubelet provider gains it with one line (README,
// "Coming from virtual-kubelet"). opts is the kubelet API's query, passed
// on as it is (tailLines, limitBytes, timestamps, follow, previous,
// sinceSeconds, sinceTime): the provider applies it, as under
// virtual-kubelet. With Follow the reader ends when the container stops;
// Runtime closes it when the request ends.
type ContainerLogsProvider interface {
	ContainerLogs(ctx context.Context, namespace, pod, container string, opts *v1.PodLogOptions) (io.ReadCloser, error)
}

// ContainerExecProvider runs a command in a container (virtual-kubelet's
// RunInContainer) over runtime.AttachIO. A non-zero exit is an error with
// an ExitStatus() int method (k8s.io/utils/exec's ExitError), passed to
// the client as the exit code.
type ContainerExecProvider interface {
	ExecInContainer(ctx context.Context, namespace, pod, container string, cmd []string, streams runtime.AttachIO) error
}

// ContainerAttachProvider attaches to a container (virtual-kubelet's
// AttachToContainer) over runtime.AttachIO.
type ContainerAttachProvider interface {
	AttachContainer(ctx context.Context, namespace, pod, container string, streams runtime.AttachIO) error
}

// PortForwardProvider is virtual-kubelet's PortForward, method for method
// (builtin types only), so a virtual-kubelet provider has it as it is.
type PortForwardProvider interface {
	PortForward(ctx context.Context, namespace, pod string, port int32, stream io.ReadWriteCloser) error
}

var (
	_ runtime.ContainerLogs     = (*Runtime)(nil)
	_ runtime.ContainerStreamer = (*Runtime)(nil)
	_ runtime.PortForwarder     = (*Runtime)(nil)
)

// KubeletAPI returns what the provider serves of the kubelet API's
// container logs, exec and attach, and port-forward, for server.Config's
// Logs, Streaming and PortForward: r where the provider has the methods
// (ContainerLogsProvider; ContainerExecProvider or ContainerAttachProvider;
// PortForwardProvider), nil where it has none, so that the server does not
// serve the endpoint (404), as for any runtime without the capability.
// Runtime's own methods answer an error wrapping runtime.ErrNotSupported
// for what the provider lacks.
func (r *Runtime) KubeletAPI() (logs runtime.ContainerLogs, streaming runtime.ContainerStreamer, portForward runtime.PortForwarder) {
	if _, ok := r.p.(ContainerLogsProvider); ok {
		logs = r
	}
	_, exec := r.p.(ContainerExecProvider)
	_, attach := r.p.(ContainerAttachProvider)
	if exec || attach {
		streaming = r
	}
	if _, ok := r.p.(PortForwardProvider); ok {
		portForward = r
	}
	return logs, streaming, portForward
}

// GetContainerLogs copies the provider's logs of the container instance
// id (ContainerLogsProvider) to stdout, with opts passed on, until they
// end or ctx does. The provider's logs are one stream: stderr is unused.
func (r *Runtime) GetContainerLogs(ctx context.Context, pod *v1.Pod, id runtime.ContainerID, opts *v1.PodLogOptions, stdout, _ io.Writer) error {
	lp, ok := r.p.(ContainerLogsProvider)
	if !ok {
		return fmt.Errorf("provider: no ContainerLogs: %w", runtime.ErrNotSupported)
	}
	name, err := r.containerName(pod, id)
	if err != nil {
		return err
	}
	if opts == nil {
		opts = &v1.PodLogOptions{}
	}
	rc, err := lp.ContainerLogs(ctx, pod.Namespace, pod.Name, name, opts.DeepCopy())
	if err != nil {
		return providerErr("ContainerLogs", pod, name, err)
	}
	if rc == nil {
		return nil
	}
	// A followed stream blocks in Read: closing it is what ends it with
	// the request.
	stop := context.AfterFunc(ctx, func() { rc.Close() })
	_, err = io.Copy(stdout, rc)
	if stop() {
		rc.Close()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("provider: logs of %s/%s %s: %w", pod.Namespace, pod.Name, name, err)
	}
	return nil
}

// Exec runs cmd in the container through the provider's ExecInContainer;
// its error (an exit code, say) is passed through.
func (r *Runtime) Exec(ctx context.Context, pod *v1.Pod, id runtime.ContainerID, cmd []string, streams runtime.AttachIO) error {
	ep, ok := r.p.(ContainerExecProvider)
	if !ok {
		return fmt.Errorf("provider: no ExecInContainer: %w", runtime.ErrNotSupported)
	}
	name, err := r.containerName(pod, id)
	if err != nil {
		return err
	}
	return providerErr("ExecInContainer", pod, name, ep.ExecInContainer(ctx, pod.Namespace, pod.Name, name, cmd, streams))
}

// Attach attaches the streams to the container through the provider's
// AttachContainer.
func (r *Runtime) Attach(ctx context.Context, pod *v1.Pod, id runtime.ContainerID, streams runtime.AttachIO) error {
	ap, ok := r.p.(ContainerAttachProvider)
	if !ok {
		return fmt.Errorf("provider: no AttachContainer: %w", runtime.ErrNotSupported)
	}
	name, err := r.containerName(pod, id)
	if err != nil {
		return err
	}
	return providerErr("AttachContainer", pod, name, ap.AttachContainer(ctx, pod.Namespace, pod.Name, name, streams))
}

// PortForward forwards port of the pod through the provider's PortForward.
func (r *Runtime) PortForward(ctx context.Context, pod *v1.Pod, port int32, stream io.ReadWriteCloser) error {
	pp, ok := r.p.(PortForwardProvider)
	if !ok {
		return fmt.Errorf("provider: no PortForward: %w", runtime.ErrNotSupported)
	}
	return providerErr("PortForward", pod, strconv.Itoa(int(port)), pp.PortForward(ctx, pod.Namespace, pod.Name, port, stream))
}

// providerErr passes err through (an exit code stays one), marking a
// provider's "no such pod" as runtime.ErrNotFound.
func providerErr(method string, pod *v1.Pod, what string, err error) error {
	if err == nil {
		return nil
	}
	if isNotFound(err) {
		return fmt.Errorf("provider %s %s/%s %s: %w (%w)", method, pod.Namespace, pod.Name, what, runtime.ErrNotFound, err)
	}
	return err
}

// containerName is the name of the container instance id of pod: the one
// whose current or last status carries id (the provider's own IDs), or
// whose made-up ID (containerStatus: <uid>-<name>-<restarts>) it is.
func (r *Runtime) containerName(pod *v1.Pod, id runtime.ContainerID) (string, error) {
	s := id.String()
	r.mu.Lock()
	var st *v1.PodStatus
	if rec := r.recordLocked(pod.UID, pod.Namespace, pod.Name, false); rec != nil {
		st = rec.status
	}
	r.mu.Unlock()
	if st != nil && !id.IsEmpty() {
		for _, list := range [][]v1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses, st.EphemeralContainerStatuses} {
			for i := range list {
				cs := &list[i]
				if cs.ContainerID == s || (cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ContainerID == s) {
					return cs.Name, nil
				}
			}
		}
	}
	if id.Type == r.cfg.Type {
		if rest, ok := strings.CutPrefix(id.ID, string(pod.UID)+"-"); ok && pod.UID != "" {
			if i := strings.LastIndexByte(rest, '-'); i > 0 {
				if _, err := strconv.Atoi(rest[i+1:]); err == nil {
					return rest[:i], nil
				}
			}
		}
	}
	return "", fmt.Errorf("provider: no container %q in pod %s/%s: %w", s, pod.Namespace, pod.Name, runtime.ErrNotFound)
}
