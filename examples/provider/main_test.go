package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nodekit/nodekit/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// processesWith lists the pids whose command line contains s.
func processesWith(t *testing.T, s string) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			pids = append(pids, filepath.Base(d))
		}
	}
	return pids
}

func TestPodRunsAsProcessesAndStopsOnCancel(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc to look for processes")
	}
	// A sleep no other process runs, to find it in /proc.
	marker := fmt.Sprintf("30.%d", time.Now().UnixNano()%1_000_000_000)
	dir, logs := t.TempDir(), t.TempDir()
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - {name: hello, image: ignored, command: [sh, -c, "echo hi; sleep %s"]}
`, marker)
	if err := os.WriteFile(filepath.Join(dir, "hello.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-pod-manifest-path", dir, "-node-name", "p1", "-log-root", logs}, &stdout, &stderr)
	}()

	running := regexp.MustCompile(`(?m)^hello-p1\s+Running\s+hello\s+running\s+0$`)
	deadline := time.Now().Add(60 * time.Second)
	for !running.MatchString(stdout.String()) || len(processesWith(t, "sleep "+marker)) == 0 {
		select {
		case err := <-done:
			t.Fatalf("run returned %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod not running\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	logFiles, _ := filepath.Glob(filepath.Join(logs, "default_hello-p1_*", "hello", "0.log"))
	if len(logFiles) != 1 {
		t.Fatalf("log files %v, want one", logFiles)
	}
	if b, _ := os.ReadFile(logFiles[0]); strings.TrimSpace(string(b)) != "hi" {
		t.Errorf("container output %q, want hi", b)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	// The container's children were killed with its process group; the
	// kernel finishes them (and init reaps them) asynchronously, so a pid
	// may linger a moment after run returned.
	for gone := time.Now().Add(10 * time.Second); len(processesWith(t, "sleep "+marker)) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(gone) {
			t.Fatalf("processes left after shutdown: %v", processesWith(t, "sleep "+marker))
		}
	}
	frames := strings.Split(stdout.String(), "--- ")
	if last := frames[len(frames)-1]; strings.Contains(last, "running") {
		t.Fatalf("last frame still shows a running container:\n%s", last)
	}
}

func TestBadFlagsGiveAClearError(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no source", nil, "nothing to run"},
		{"extra argument", []string{"-pod-manifest-path", "x", "y"}, "unexpected arguments"},
		{"negative duration", []string{"-pod-manifest-path", "x", "-duration", "-1s"}, "-duration must not be negative"},
		{"unknown flag", []string{"-nope"}, "flag provided but not defined"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
