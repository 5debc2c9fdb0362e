//go:build unix

package testenv

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestExclusiveHoldExcludesEveryOther(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	tests := []struct {
		name       string
		held, want bool // exclusive?
		blocked    bool
	}{
		{"shared holders share", false, false, false},
		{"exclusive waits for a shared holder", false, true, true},
		{"shared waits for an exclusive holder", true, false, true},
		{"exclusive waits for an exclusive holder", true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release, err := lockFile(path, tt.held, false)
			if err != nil {
				t.Fatal(err)
			}
			second, err := lockFile(path, tt.want, true)
			if tt.blocked != errors.Is(err, errLocked) {
				t.Fatalf("second lock: err = %v, want blocked=%v", err, tt.blocked)
			}
			if second != nil {
				second()
			}
			release()
			again, err := lockFile(path, tt.want, true)
			if err != nil {
				t.Fatalf("after release: %v", err)
			}
			again()
		})
	}
}

func TestEndpointsHaveTheirOwnLock(t *testing.T) {
	if lockPath("unix:///a.sock") == lockPath("unix:///b.sock") {
		t.Fatal("two endpoints share a lock file")
	}
}
