package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/internal/testenv"
)

// One command, -processes 3: three processes, one shard each, bring every
// node up, and a signal to the command stops them all without an error.
func TestProcessesRunAShardEach(t *testing.T) {
	c, kubeconfig := startCluster(t)
	cs := kubernetes.NewForConfigOrDie(c.RESTConfig())
	t.Setenv(childEnv, "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-kubeconfig", kubeconfig, "-nodes", "3", "-name-prefix", "pr-", "-processes", "3"}, log)
	}()
	eventually(t, 60*time.Second, "3 Nodes Ready", func() (bool, string) {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: SimnodeLabel + "=pr"})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, n := range l.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == 3, fmt.Sprintf("%d of 3 Ready", ready)
	})
	for i := range 3 {
		if want := fmt.Sprintf(`"shard"="%d/3"`, i); !strings.Contains(log.String(), want) {
			t.Errorf("no process logged %s:\n%s", want, log.String())
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run -processes 3 after a signal: %v\n%s", err, log.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the processes did not stop within 60s\n%s", log.String())
	}
}
