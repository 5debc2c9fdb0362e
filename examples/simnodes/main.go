package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodekit/nodekit/examples/internal/nodeflags"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	nodeflags.Exit("simnodes", err)
}
