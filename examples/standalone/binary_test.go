package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodekit/nodekit/internal/testenv"
)

// TestBinaryServesHealthzAndMetrics builds the program and runs it as an
// operator would: `curl localhost:<healthz-port>/healthz` answers ok, a
// scrape of /metrics reads the kubelet's metric names, and SIGTERM ends it
// with status 0.
func TestBinaryServesHealthzAndMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the program")
	}
	bin := testenv.BuildProgram(t, ".")
	hp, ap := freePort(t), freePort(t)
	var stderr testenv.Buffer
	cmd := exec.Command(bin, "-pod-manifest-path", "manifests/web.yaml", "-node-name", "bin-node", "-healthz-port", hp, "-port", ap)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := httpGet(t, "http://localhost:"+hp+"/healthz")
		if code == 200 && body == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz: %d %q\nstderr:\n%s", code, body, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var metrics string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, metrics = httpGet(t, "http://localhost:"+ap+"/metrics")
		if strings.Contains(metrics, `kubelet_running_containers{container_state="running"} 1`) || time.Now().After(deadline) {
			break
		}
	}
	for _, name := range kubeletMetrics {
		if !strings.Contains(metrics, "# TYPE "+name+" ") {
			t.Errorf("a scrape lacks %s", name)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no exit within a minute of SIGTERM")
	}
	_ = os.Remove(bin)
}
