package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildProgram builds the Go program in dir (relative to the test's
// package, possibly a module of its own) with the extra build flags into a
// temporary directory and returns the binary's path. Without a go tool the
// test is skipped, or failed with CI=true.
func BuildProgram(t testing.TB, dir string, flags ...string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("CI=true but there is no go tool to build the program with")
			}
			t.Skip("no go tool to build the program with")
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(abs))
	cmd := exec.CommandContext(t.Context(), goBin, append(append([]string{"build"}, flags...), "-o", bin, ".")...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", dir, err, out)
	}
	return bin
}
