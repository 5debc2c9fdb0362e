package runtime

import (
	"context"
	"io"

	v1 "k8s.io/api/core/v1"
)

// ContainerLogs is implemented by runtimes that keep container logs; the
// kubelet's /containerLogs endpoint (package server) serves them.
type ContainerLogs interface {
	// GetContainerLogs writes the logs of the container instance id, one of
	// pod's, to stdout and stderr as opts asks (tailLines, limitBytes,
	// sinceSeconds, sinceTime, timestamps, follow). With Follow it returns
	// once the container stopped and its logs are written, or when ctx
	// ends. A container the runtime does not know gives an error wrapping
	// ErrNotFound.
	GetContainerLogs(ctx context.Context, pod *v1.Pod, id ContainerID, opts *v1.PodLogOptions, stdout, stderr io.Writer) error
}
