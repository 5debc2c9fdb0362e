package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// runProcesses runs n processes of this program, each with the same flags
// and "-shard i/n", and waits for them all. When ctx ends, or a process
// fails, each of the others gets SIGTERM (SIGKILL 30s later), as a signal
// to one shard would give it. It returns the failed processes' errors,
// each naming its shard.
func runProcesses(ctx context.Context, args []string, n int, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("-processes: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		// The last value of a flag wins: these replace any given before.
		shardArgs := append(args[:len(args):len(args)], "-processes=1", fmt.Sprintf("-shard=%d/%d", i, n))
		cmd := exec.CommandContext(ctx, self, shardArgs...)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 30 * time.Second
		if err := cmd.Start(); err != nil {
			errs[i] = fmt.Errorf("shard %d/%d: %w", i, n, err)
			cancel()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Stopped by the signal and exited cleanly: Wait reports
			// the context's end, which is no failure.
			if err := cmd.Wait(); err != nil && !errors.Is(err, context.Canceled) {
				errs[i] = fmt.Errorf("shard %d/%d: %w", i, n, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
