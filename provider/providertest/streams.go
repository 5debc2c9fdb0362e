package providertest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// Streams is a Provider with container logs, exec, attach and port-forward
// in nodekit's provider interfaces (provider.ContainerLogsProvider,
// ContainerExecProvider, ContainerAttachProvider, PortForwardProvider):
//
//   - ContainerLogs returns the text SetLogs gave, its last TailLines lines
//     and then its first LimitBytes bytes; it records the options it got
//     (LogOptions). Follow does not wait for more.
//   - ExecInContainer runs "echo ARGS..." (ARGS on stdout), "cat" (stdin to
//     stdout), "exit N" (an ExitError with N) and "fail" (a plain error).
//   - AttachContainer writes "attached <container>\n" and, with TTY, one
//     "size WxH\n" per resize until stdin ends; without TTY it copies
//     stdin to stdout.
//   - PortForward answers one HTTP request on the stream with a 200 whose
//     body is "<namespace>/<pod>:<port>".
//
// Each fails with a NotFound error for a pod the provider does not have.
type Streams struct {
	*Provider

	smu     sync.Mutex
	logs    map[string]string
	logOpts []v1.PodLogOptions
}

// NewStreams returns an empty polled provider with streams.
func NewStreams() *Streams { return &Streams{Provider: New(nil), logs: map[string]string{}} }

// ExitError is a command's non-zero exit, as k8s.io/utils/exec's
// ExitError reports it.
type ExitError struct{ Code int }

func (e ExitError) Error() string   { return fmt.Sprintf("command exited with %d", e.Code) }
func (e ExitError) ExitStatus() int { return e.Code }
func (e ExitError) Exited() bool    { return true }

// SetLogs sets the logs of a container.
func (s *Streams) SetLogs(ns, pod, container, text string) {
	s.smu.Lock()
	defer s.smu.Unlock()
	s.logs[key(ns, pod)+"/"+container] = text
}

// LogOptions returns the options of every ContainerLogs call so far.
func (s *Streams) LogOptions() []v1.PodLogOptions {
	s.smu.Lock()
	defer s.smu.Unlock()
	return append([]v1.PodLogOptions(nil), s.logOpts...)
}

func (s *Streams) has(method, ns, pod string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(method); err != nil {
		return err
	}
	if _, ok := s.pods[key(ns, pod)]; !ok {
		return notFound(ns, pod)
	}
	return nil
}

// ContainerLogs returns the container's logs as opts asks (tail, limit).
func (s *Streams) ContainerLogs(_ context.Context, namespace, pod, container string, opts *v1.PodLogOptions) (io.ReadCloser, error) {
	if err := s.has("ContainerLogs", namespace, pod); err != nil {
		return nil, err
	}
	s.smu.Lock()
	s.logOpts = append(s.logOpts, *opts.DeepCopy())
	text := s.logs[key(namespace, pod)+"/"+container]
	s.smu.Unlock()
	if opts.TailLines != nil {
		lines := strings.SplitAfter(text, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if n := int(*opts.TailLines); n < len(lines) {
			lines = lines[len(lines)-n:]
		}
		text = strings.Join(lines, "")
	}
	if opts.LimitBytes != nil && int(*opts.LimitBytes) < len(text) {
		text = text[:*opts.LimitBytes]
	}
	return io.NopCloser(strings.NewReader(text)), nil
}

// ExecInContainer runs echo, cat, exit N or fail.
func (s *Streams) ExecInContainer(_ context.Context, namespace, pod, _ string, cmd []string, streams runtime.AttachIO) error {
	if err := s.has("ExecInContainer", namespace, pod); err != nil {
		return err
	}
	if len(cmd) == 0 {
		return fmt.Errorf("no command")
	}
	switch cmd[0] {
	case "echo":
		if streams.Stdout != nil {
			fmt.Fprintln(streams.Stdout, strings.Join(cmd[1:], " "))
		}
		return nil
	case "cat":
		if streams.Stdin != nil && streams.Stdout != nil {
			_, err := io.Copy(streams.Stdout, streams.Stdin)
			return err
		}
		return nil
	case "exit":
		if len(cmd) != 2 {
			return fmt.Errorf("exit: want one code")
		}
		n, err := strconv.Atoi(cmd[1])
		if err != nil {
			return err
		}
		if n != 0 {
			return ExitError{Code: n}
		}
		return nil
	case "fail":
		return fmt.Errorf("the provider failed")
	}
	return fmt.Errorf("%s: command not found", cmd[0])
}

// AttachContainer greets, then reports resizes (TTY) or echoes stdin.
func (s *Streams) AttachContainer(ctx context.Context, namespace, pod, container string, streams runtime.AttachIO) error {
	if err := s.has("AttachContainer", namespace, pod); err != nil {
		return err
	}
	if streams.Stdout != nil {
		fmt.Fprintf(streams.Stdout, "attached %s\n", container)
	}
	if streams.TTY && streams.Resize != nil {
		for {
			select {
			case <-ctx.Done():
				return nil
			case sz, ok := <-streams.Resize:
				if !ok {
					return nil
				}
				if streams.Stdout != nil {
					fmt.Fprintf(streams.Stdout, "size %dx%d\n", sz.Width, sz.Height)
				}
			}
		}
	}
	if streams.Stdin != nil && streams.Stdout != nil {
		_, err := io.Copy(streams.Stdout, streams.Stdin)
		return err
	}
	return nil
}

// PortForward answers one HTTP request with "<namespace>/<pod>:<port>".
func (s *Streams) PortForward(_ context.Context, namespace, pod string, port int32, stream io.ReadWriteCloser) error {
	if err := s.has("PortForward", namespace, pod); err != nil {
		return err
	}
	defer stream.Close()
	req, err := http.ReadRequest(bufio.NewReader(stream))
	if err != nil {
		return err
	}
	req.Body.Close()
	body := fmt.Sprintf("%s/%s:%d", namespace, pod, port)
	resp := &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1, Close: true,
		ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader([]byte(body)))}
	return resp.Write(stream)
}
