// Package reltable lets the reliability tests print their row of
// docs/reliability.md, so the table is regenerated from what the tests
// measured (hack/reliability.sh) rather than typed by hand.
//
//	reltable.Print(t, reltable.Row{
//		Test: "TestSoakChurnWithRuntimeFaults",
//		Done: "10,000 create/update/delete cycles, 10 % of every runtime method failing",
//		Held: fmt.Sprintf("goroutines %d→%d", before, after),
//		Run:  "NODEKIT_SOAK=1 go test -run Soak ./agent",
//	})
package reltable

import (
	"fmt"
	"strings"
	"testing"
)

// Prefix starts every printed row; hack/reliability.sh collects the lines
// that carry it.
const Prefix = "reliability-row:"

// Row is one line of the table.
type Row struct {
	// Test is the test's name, Done what it did, Held what held with the
	// figures measured, Run the command that runs it.
	Test, Done, Held, Run string
}

// Print logs r and writes it to stdout as a markdown table row after
// Prefix. Go prints a test's stdout with -v; hack/reliability.sh runs the
// tests so.
func Print(t testing.TB, r Row) {
	t.Helper()
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	line := fmt.Sprintf("| %s | %s | %s | `%s` |", cell(r.Test), cell(r.Done), cell(r.Held), cell(r.Run))
	t.Log(line)
	fmt.Println(Prefix, line)
}
