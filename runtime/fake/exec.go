package fake

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nodekit/nodekit/runtime"
)

var _ runtime.CommandRunner = (*Runtime)(nil)

// ExecResult programs what ExecSync returns for a command.
type ExecResult struct {
	Stdout, Stderr string
	ExitCode       int
	// Err, if set, is returned as the runtime's error.
	Err error
	// Hang makes the command run past any timeout: ExecSync waits the
	// timeout on the clock, then fails with runtime.ErrExecTimeout (with no
	// timeout it waits for ctx); an Exec session runs until ctx ends.
	Hang bool
	// EchoStdin makes an Exec session copy its stdin to its stdout, after
	// Stdout and before Stderr, until stdin ends (ExecSync has no stdin).
	EchoStdin bool
}

type execKey struct{ container, cmd string }

// SetExecResult programs ExecSync for cmd in every container named
// container; an empty cmd programs every command of it not programmed
// itself. Unprogrammed commands exit 0 with no output.
func (r *Runtime) SetExecResult(container string, cmd []string, res ExecResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.execs == nil {
		r.execs = map[execKey]ExecResult{}
	}
	r.execs[execKey{container, strings.Join(cmd, "\x00")}] = res
}

// ExecSync runs a programmed command (see SetExecResult) in a running
// container; the call is recorded as "ExecSync" and its latency and
// failure rate apply.
func (r *Runtime) ExecSync(ctx context.Context, id runtime.ContainerID, cmd []string, timeout time.Duration) ([]byte, []byte, int, error) {
	res, err := r.execResult(ctx, mExecSync, id, cmd)
	if err != nil {
		return nil, nil, 0, err
	}
	if res.Hang {
		if timeout <= 0 {
			<-ctx.Done()
			return nil, nil, 0, ctx.Err()
		}
		if err := r.wait(ctx, timeout); err != nil {
			return nil, nil, 0, err
		}
		return nil, nil, 0, fmt.Errorf("fake: command %q: %w", strings.Join(cmd, " "), runtime.ErrExecTimeout)
	}
	if res.Err != nil {
		return nil, nil, 0, res.Err
	}
	return []byte(res.Stdout), []byte(res.Stderr), res.ExitCode, nil
}

// execResult finds what cmd does in the running container id, recording
// the call as m.
func (r *Runtime) execResult(ctx context.Context, m method, id runtime.ContainerID, cmd []string) (ExecResult, error) {
	r.mu.Lock()
	p, c := r.execTarget(id)
	if c == nil {
		r.mu.Unlock()
		return ExecResult{}, fmt.Errorf("fake: exec in container %s: %w", id, runtime.ErrNotFound)
	}
	if c.settle(r.clock.Now()) {
		r.emit(p, c, runtime.ContainerStoppedEvent)
	}
	if !c.running() {
		r.mu.Unlock()
		return ExecResult{}, fmt.Errorf("fake: exec in container %s: container is not running", id)
	}
	name, uid, notReady := c.name, p.uid, r.clock.Now().Before(c.readyAt)
	r.mu.Unlock()
	if err := r.enter(ctx, m, uid); err != nil {
		return ExecResult{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.execs[execKey{name, strings.Join(cmd, "\x00")}]
	if !ok {
		res, ok = r.execs[execKey{name, ""}]
	}
	if !ok && notReady {
		res.ExitCode = 1 // Behavior.ReadyAfter
	}
	return res, nil
}

// execTarget finds the container with id and its pod; r.mu must be held.
func (r *Runtime) execTarget(id runtime.ContainerID) (*podState, *container) {
	if p, ok := r.execPods[id]; ok {
		if c := p.byID(id); c != nil && !p.removed {
			return p, c
		}
		delete(r.execPods, id)
	}
	for _, p := range r.pods {
		if c := p.byID(id); c != nil {
			if r.execPods == nil {
				r.execPods = map[runtime.ContainerID]*podState{}
			}
			r.execPods[id] = p
			return p, c
		}
	}
	return nil, nil
}
