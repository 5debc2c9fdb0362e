package procruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// sleeping lists the pids of processes running "sleep arg".
func sleeping(t *testing.T, arg string) []string {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []string
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && strings.ReplaceAll(string(b), "\x00", " ") == "sleep "+arg+" " {
			pids = append(pids, filepath.Base(d))
		}
	}
	return pids
}

// waitGone waits until no process runs "sleep arg"; the kernel reaps the
// killed children asynchronously.
func waitGone(t *testing.T, arg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(sleeping(t, arg)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes left: %v", sleeping(t, arg))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProcessesAContainerStartsDieWithIt(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc")
	}
	tests := []struct {
		name   string
		script string
		kill   bool
	}{
		{"killed container takes its children", "sleep %s & echo started; wait", true},
		{"exited container takes its children", "sleep %s & echo started; sleep 0.2", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arg := fmt.Sprintf("40.%d%d", time.Now().UnixNano()%1_000_000, i)
			r, err := New(Config{Root: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			pod := newPod(v1.RestartPolicyNever, nil, sh("main", fmt.Sprintf(tt.script, arg)))
			converge(t, r, pod, func(st *runtime.PodStatus) bool { return state(st, "main") != "" })
			deadline := time.Now().Add(10 * time.Second)
			for len(sleeping(t, arg)) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the child never started")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if tt.kill {
				if err := r.KillPod(context.Background(), pod, runtime.Pod{ID: pod.UID}, nil); err != nil {
					t.Fatal(err)
				}
			}
			waitGone(t, arg)
		})
	}
}
