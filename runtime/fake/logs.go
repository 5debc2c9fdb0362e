package fake

import (
	"context"
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/crilog"
)

var _ runtime.ContainerLogs = (*Runtime)(nil)

// WriteLog makes the running instance of the named container of a pod
// print msg (one line) on stream, "stdout" or "stderr". It returns an
// error wrapping runtime.ErrNotFound if no such container runs.
func (r *Runtime) WriteLog(uid types.UID, name, stream, msg string) error {
	if stream != "stdout" && stream != "stderr" {
		return fmt.Errorf("fake: stream %q is neither stdout nor stderr: %w", stream, runtime.ErrInvalidConfig)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.runningContainer(uid, name)
	if c == nil {
		return fmt.Errorf("fake: no running container %q in pod %s: %w", name, uid, runtime.ErrNotFound)
	}
	c.appendLog(r.clock.Now(), stream, msg)
	r.notifyChanged()
	return nil
}

// appendLog adds one line in the CRI log format; r.mu must be held.
func (c *container) appendLog(at time.Time, stream, msg string) {
	c.logs = fmt.Appendf(c.logs, "%s %s F %s\n", at.UTC().Format(time.RFC3339Nano), stream, msg)
}

// GetContainerLogs serves what the container printed (Behavior.Logs at
// its start, WriteLog since) with the kubelet's options, as runtime/cri
// serves a CRI log file; a followed log ends once the container stops. The
// logs go with the container when it is removed.
func (r *Runtime) GetContainerLogs(ctx context.Context, _ *v1.Pod, id runtime.ContainerID, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
	r.mu.Lock()
	_, c := r.execTarget(id)
	if c == nil {
		r.mu.Unlock()
		return fmt.Errorf("fake: logs of container %s: %w", id, runtime.ErrNotFound)
	}
	size := int64(len(c.logs))
	r.mu.Unlock()
	running := func(context.Context) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		p, c := r.execTarget(id)
		if c != nil && c.settle(r.clock.Now()) {
			r.emit(p, c, runtime.ContainerStoppedEvent)
		}
		return c != nil && c.running()
	}
	return crilog.Read(ctx, logReader{r: r, c: c}, size, opts, crilog.Options{Running: running, Clock: r.clock}, stdout, stderr)
}

// logReader reads a container's logs under the runtime's lock.
type logReader struct {
	r *Runtime
	c *container
}

func (l logReader) ReadAt(p []byte, off int64) (int, error) {
	l.r.mu.Lock()
	defer l.r.mu.Unlock()
	if off >= int64(len(l.c.logs)) {
		return 0, io.EOF
	}
	n := copy(p, l.c.logs[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
