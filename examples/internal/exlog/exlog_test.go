package exlog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nodekit/nodekit/examples/internal/exlog"
)

func TestVerbosityIsPerLoggerAndSurvivesNamesAndValues(t *testing.T) {
	var quiet, loud strings.Builder
	q := exlog.New(&quiet, 0).WithName("agent").WithValues("node", "n1")
	l := exlog.New(&loud, 2).WithName("agent").WithValues("node", "n1")
	for _, log := range []interface {
		Info(string, ...any)
	}{q, q.V(1), l.V(2), l.V(3)} {
		log.Info("hello")
	}
	q.Error(errors.New("boom"), "failed")

	if got := strings.Count(quiet.String(), "hello"); got != 1 {
		t.Errorf("verbosity 0 wrote %d of V(0), V(1); want only V(0):\n%s", got, quiet.String())
	}
	if !strings.Contains(quiet.String(), "failed") {
		t.Errorf("errors are written at any verbosity:\n%s", quiet.String())
	}
	if got := strings.Count(loud.String(), "hello"); got != 1 {
		t.Errorf("verbosity 2 wrote %d of V(2), V(3); want only V(2):\n%s", got, loud.String())
	}
	if !strings.Contains(loud.String(), "agent") || !strings.Contains(loud.String(), `"node"="n1"`) {
		t.Errorf("name and values missing:\n%s", loud.String())
	}
}
