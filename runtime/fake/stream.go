package fake

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodekit/nodekit/runtime"
)

var (
	_ runtime.ContainerStreamer = (*Runtime)(nil)
	_ runtime.PortForwarder     = (*Runtime)(nil)
)

// Exec runs a programmed command (SetExecResult, as ExecSync) as an
// interactive session: it prints Stdout, copies stdin to stdout if
// EchoStdin, prints Stderr (to stdout with a TTY) and exits with ExitCode,
// a non-zero one as a k8s.io/utils/exec CodeExitError; Hang runs until ctx
// ends. Recorded as "Exec", with its latency and failure rate.
func (r *Runtime) Exec(ctx context.Context, _ *v1.Pod, id runtime.ContainerID, cmd []string, s runtime.AttachIO) error {
	res, err := r.execResult(ctx, mExec, id, cmd)
	if err != nil {
		return err
	}
	if res.Hang {
		<-ctx.Done()
		return ctx.Err()
	}
	if res.Err != nil {
		return res.Err
	}
	stdout, stderr := orDiscard(s.Stdout), orDiscard(s.Stderr)
	if s.TTY {
		stderr = stdout
	}
	if _, err := io.WriteString(stdout, res.Stdout); err != nil {
		return err
	}
	if res.EchoStdin && s.Stdin != nil {
		if err := copyUntil(ctx, stdout, s.Stdin); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(stderr, res.Stderr); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command %q exited with %d", strings.Join(cmd, " "), res.ExitCode), Code: res.ExitCode}
	}
	return nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// copyUntil copies src to dst until src ends or ctx does. A read blocked
// when ctx ends is left to the caller's close of src.
func copyUntil(ctx context.Context, dst io.Writer, src io.Reader) error {
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(dst, src)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Attach streams what the running container prints from now on (WriteLog
// lines, stderr's to stdout with a TTY) until it stops or ctx ends, then
// returns nil. Stdin reaches a container whose spec has stdin: each line is
// echoed to its log on stdout, as `cat` would; otherwise it is read and
// dropped. Recorded as "Attach".
func (r *Runtime) Attach(ctx context.Context, pod *v1.Pod, id runtime.ContainerID, s runtime.AttachIO) error {
	r.mu.Lock()
	p, c := r.execTarget(id)
	if c == nil {
		r.mu.Unlock()
		return fmt.Errorf("fake: attach to container %s: %w", id, runtime.ErrNotFound)
	}
	if c.settle(r.clock.Now()) {
		r.emit(p, c, runtime.ContainerStoppedEvent)
	}
	if !c.running() {
		r.mu.Unlock()
		return fmt.Errorf("fake: attach to container %s: container is not running", id)
	}
	uid, name, off := p.uid, c.name, len(c.logs)
	r.mu.Unlock()
	if err := r.enter(ctx, mAttach, uid); err != nil {
		return err
	}
	if s.Stdin != nil {
		echo := false
		if pod != nil {
			for _, sc := range pod.Spec.Containers {
				echo = echo || (sc.Name == name && sc.Stdin)
			}
		}
		go r.attachStdin(c, s.Stdin, echo)
	}
	stdout, stderr := orDiscard(s.Stdout), orDiscard(s.Stderr)
	if s.TTY {
		stderr = stdout
	}
	for {
		r.mu.Lock()
		now := r.clock.Now()
		if c.settle(now) {
			r.emit(p, c, runtime.ContainerStoppedEvent)
		}
		data := bytes.Clone(c.logs[off:])
		off = len(c.logs)
		running, exitAt, changed := c.running(), c.exitAt, r.changedCh()
		r.mu.Unlock()
		if err := writeLogLines(data, stdout, stderr); err != nil {
			return err
		}
		if !running {
			return nil
		}
		if !r.waitChange(ctx, changed, exitAt.Sub(now), !exitAt.IsZero()) {
			return nil
		}
	}
}

// waitChange waits for changed, or d on the clock if timed; false when ctx
// ended first.
func (r *Runtime) waitChange(ctx context.Context, changed <-chan struct{}, d time.Duration, timed bool) bool {
	var fire <-chan time.Time
	if timed {
		t := r.clock.NewTimer(d)
		defer t.Stop()
		fire = t.C()
	}
	select {
	case <-changed:
	case <-fire:
	case <-ctx.Done():
		return false
	}
	return true
}

// attachStdin reads an attached stdin until it ends, echoing each line to
// c's log if echo.
func (r *Runtime) attachStdin(c *container, stdin io.Reader, echo bool) {
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		if !echo {
			continue
		}
		r.mu.Lock()
		if c.running() {
			c.appendLog(r.clock.Now(), "stdout", sc.Text())
			r.notifyChanged()
		}
		r.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, stdin) // after a line too long to scan
}

// writeLogLines writes the messages of CRI log lines to the writer of
// their stream; a partial line (tag P) gets no newline.
func writeLogLines(data []byte, stdout, stderr io.Writer) error {
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		fields := bytes.SplitN(line, []byte{' '}, 4)
		if len(fields) < 4 {
			continue
		}
		w := stdout
		if string(fields[1]) == "stderr" {
			w = stderr
		}
		msg := fields[3]
		if string(fields[2]) != "P" {
			msg = append(msg, '\n')
		}
		if _, err := w.Write(msg); err != nil {
			return err
		}
	}
	return nil
}

// changedCh returns a channel closed at the next log line or container
// change; r.mu must be held.
func (r *Runtime) changedCh() <-chan struct{} {
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	return r.changed
}

// notifyChanged wakes what waits on changedCh; r.mu must be held.
func (r *Runtime) notifyChanged() {
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// PortForward connects stream to port of the pod on the in-memory network,
// as DialPod does: refused (an error) unless a running container of the
// pod listens there; otherwise the pod answers as a healthy server (an
// HTTP request gets 200 "ok"). It returns when either side closes or ctx
// ends. A host-network pod is not served. Recorded as "PortForward".
func (r *Runtime) PortForward(ctx context.Context, pod *v1.Pod, port int32, stream io.ReadWriteCloser) error {
	r.mu.Lock()
	p, ok := r.pods[pod.UID]
	var sb *sandbox
	if ok && !p.removed {
		sb = p.newestSandbox()
	}
	if sb == nil || sb.state != runtime.SandboxStateReady || len(sb.ips) == 0 {
		r.mu.Unlock()
		if sb != nil && sb.hostNetwork {
			return fmt.Errorf("fake: port forward to pod %s: a host-network pod is not served", pod.UID)
		}
		return fmt.Errorf("fake: port forward to pod %s: no ready sandbox: %w", pod.UID, runtime.ErrNotFound)
	}
	ip := sb.ips[0]
	r.mu.Unlock()
	if err := r.enter(ctx, mPortForward, pod.UID); err != nil {
		return err
	}
	conn, err := r.DialPod(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(conn, stream)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(stream, conn)
		done <- struct{}{}
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}
