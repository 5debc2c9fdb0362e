package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// process is one running server. Its output goes to a log file that is quoted
// in errors when the server fails to come up.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // Wait's result, set before done closes
}

func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, so that stop reaches any children; SIGKILL when the
	// test binary dies, so that no server outlives a crashed or killed test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("cluster: starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
}

// kill ends the process at once and waits for the exit.
func (p *process) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// waitReady polls ready until it reports true, the process exits or ctx ends.
func (p *process) waitReady(ctx context.Context, ready func(context.Context) bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready(ctx) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("cluster: %s exited before it was ready (%v); log %s:\n%s", p.name, p.err, p.logPath, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s not ready: %w; log %s:\n%s", p.name, ctx.Err(), p.logPath, p.logTail())
		case <-tick.C:
		}
	}
}

func (p *process) logTail() []byte {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return []byte(err.Error())
	}
	const keep = 4000
	if len(b) > keep {
		b = b[len(b)-keep:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return b
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(errors.New("cluster: no free port"), err)
		}
		ls = append(ls, l)
		_, port, _ := net.SplitHostPort(l.Addr().String())
		p, _ := strconv.Atoi(port)
		ports = append(ports, p)
	}
	return ports, nil
}
