package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAuditCountsTheSimulatorsRequestsPerWindow(t *testing.T) {
	lines := []string{
		`{"stage":"ResponseComplete","verb":"update","userAgent":"nodekit-simnodes/shard-0-of-1","objectRef":{"resource":"leases"},"requestReceivedTimestamp":"2030-01-01T00:00:01Z"}`,
		`{"stage":"ResponseComplete","verb":"patch","userAgent":"nodekit-simnodes/shard-0-of-1","objectRef":{"resource":"pods","subresource":"status"},"requestReceivedTimestamp":"2030-01-01T00:00:02Z"}`,
		`{"stage":"ResponseComplete","verb":"update","userAgent":"kube-controller-manager/v1.37.1","objectRef":{"resource":"leases"},"requestReceivedTimestamp":"2030-01-01T00:00:01Z"}`,
		`{"stage":"RequestReceived","verb":"update","userAgent":"nodekit-simnodes/shard-0-of-1","objectRef":{"resource":"leases"},"requestReceivedTimestamp":"2030-01-01T00:00:01Z"}`,
		`{"stage":"ResponseComplete","verb":"update","userAgent":"nodekit-simnodes/shard-0-of-1","objectRef":{"resource":"leases"},"requestReceivedTimestamp":"2030-01-01T00:00:11Z"}`,
		`not json`,
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	at := func(s int) time.Time { return time.Date(2030, 1, 1, 0, 0, s, 0, time.UTC) }
	got, err := countAudit(path, "nodekit-simnodes", []window{{at(0), at(10)}, {at(10), at(20)}})
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]int{
		{"update leases": 1, "patch pods/status": 1, "total": 2},
		{"update leases": 1, "total": 1},
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Errorf("window %d: %v, want %v", i, got[i], want[i])
		}
		for k, v := range want[i] {
			if got[i][k] != v {
				t.Errorf("window %d: %v, want %v", i, got[i], want[i])
			}
		}
	}
}

func TestReportReplacesOnlyItsPartOfTheDoc(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "perf.md")
	if err := os.WriteFile(doc, []byte("# Perf\n\nbefore\n"+beginMark+"\nold table\n"+endMark+"\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := `{"impl":"kwok","nodes":10,"shards":1,"pods":100,"nodesReadySeconds":2,"podsRunningSeconds":30,"restNodesOnly":{"total":6,"update leases":6},` +
		`"restWithPods":{"total":6,"update leases":6},"rollout":{"total":24,"update leases":4,"patch pods/status":20},"correctness":{"probe":"no"}}`
	if err := os.WriteFile(filepath.Join(dir, "kwok-10-1.json"), []byte(res), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeReport(filepath.Join(dir, "*.json"), doc); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(doc)
	s := string(b)
	for _, want := range []string{"before\n" + beginMark, endMark + "\nafter\n", "| kwok | 10 | 1 | 100 |", "**6.00**; update leases 6.00", "| kwok | 10 | 1 | probe | no |",
		// 20 patches per node-minute, 10 nodes, half a minute: 100 patches for 100 pods.
		"| kwok | 10 | 1 | 100 | **1.20**; patch pods/status 1.00; update leases 0.20 | 4.00 / 6.00 |"} {
		if !strings.Contains(s, want) {
			t.Errorf("doc lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "old table") {
		t.Errorf("old table kept:\n%s", s)
	}
}
