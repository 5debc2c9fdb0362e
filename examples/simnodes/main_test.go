package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nodekit/nodekit/e2e/cluster"
)

// servers is set once by TestMain, before any test runs, and only read after.
var servers struct {
	bins cluster.Binaries
	err  error
}

// childEnv makes this test binary run as simnodes itself: the processes
// -processes starts are copies of the running executable.
const childEnv = "NODEKIT_SIMNODES_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main() // exits on an error
		os.Exit(0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	servers.bins, servers.err = cluster.FindBinaries(ctx, "../../e2e/hack/servers.sh", os.Stderr)
	cancel()
	if servers.err != nil && os.Getenv("CI") == "true" {
		fmt.Fprintf(os.Stderr, "simnodes: CI=true and the servers cannot be had: %v\n", servers.err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "simnodes: goroutines leaked: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
