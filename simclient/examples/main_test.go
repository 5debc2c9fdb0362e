package examples_test

import (
	"testing"

	"go.uber.org/goleak"
	ctrl "sigs.k8s.io/controller-runtime"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// Without a logger, controller-runtime writes a stack trace to stderr
	// at its first log call 30 s (wall time) after start: a write system
	// call in the middle of a controller's request, which sim's idle probe
	// does not count as work (see sim/idle.go): a write slowed by load
	// could let the cluster step past the request.
	ctrl.SetLogger(ctrl.Log.WithSink(crlog.NullLogSink{}))
	goleak.VerifyTestMain(m)
}
