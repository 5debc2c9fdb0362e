package sim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/sim"
)

const (
	unreachable   = "tainted node.kubernetes.io/unreachable:NoExecute"
	notReady      = "tainted node.kubernetes.io/not-ready:NoExecute"
	unreachableUn = "untainted node.kubernetes.io/unreachable:NoExecute"
	notReadyUn    = "untainted node.kubernetes.io/not-ready:NoExecute"
)

// The node lifecycle controller's NoExecute taints, as upstream's: on the
// Ready condition it found at a pass (so the pass after it marks a node
// Unknown itself), swapped when the condition changes, removed when the
// node is Ready again; at most one node per 10s per zone, none in a small
// zone mostly down, none at all while no node is Ready.
func TestNodeLifecycleTaints(t *testing.T) {
	stop := func(nodes ...string) func(*testing.T, *sim.Cluster) {
		return func(t *testing.T, cl *sim.Cluster) {
			for _, n := range nodes {
				cl.Node(n).Stop()
			}
		}
	}
	tests := []struct {
		name  string
		nodes []string
		// acts are run in turn, each followed by a minute; want is then
		// each node's log of readiness and taints from the first "ready
		// Unknown" or "ready False" of any node (see matchLog).
		acts []func(t *testing.T, cl *sim.Cluster)
		want map[string][]string
	}{
		{"an unreachable node is tainted one pass after it is marked Unknown", []string{"n1", "n2"},
			acts(stop("n1"), nil),
			map[string][]string{"n1": {"+0s ready Unknown", "+5s " + unreachable}, "n2": nil}},
		{"a node reporting NotReady is tainted at the next pass", []string{"n1", "n2"},
			acts(networkDown("n1"), nil),
			map[string][]string{"n1": {"+0s ready False", "~5s " + notReady}, "n2": nil}},
		{"a node Ready again is untainted at the next pass", []string{"n1", "n2"},
			acts(networkDown("n1"), networkUp("n1")),
			map[string][]string{"n1": {"+0s ready False", "~5s " + notReady, "? ready True", "~5s " + notReadyUn}, "n2": nil}},
		{"a NotReady node that stops answering has its taint swapped at the next pass", []string{"n1", "n2"},
			acts(networkDown("n1"), stop("n1"), nil),
			map[string][]string{"n1": {"+0s ready False", "~5s " + notReady, "? ready Unknown", "+5s " + unreachable, "+0s " + notReadyUn}, "n2": nil}},
		{"nodes are tainted one per 10s", []string{"n1", "n2", "n3", "n4", "n5"},
			acts(stop("n1", "n2"), nil),
			map[string][]string{"n1": {"+0s ready Unknown", "+5s " + unreachable}, "n2": {"+0s ready Unknown", "+15s " + unreachable}}},
		{"a small zone mostly down is not tainted", []string{"n1", "n2", "n3", "n4"},
			acts(stop("n1", "n2", "n3"), nil, nil, nil),
			map[string][]string{"n1": {"+0s ready Unknown"}, "n2": {"+0s ready Unknown"}, "n3": {"+0s ready Unknown"}, "n4": nil}},
		{"no node is tainted while none is Ready", []string{"n1", "n2"},
			acts(stop("n1"), stop("n2"), nil, nil),
			map[string][]string{"n1": {"+0s ready Unknown", "+5s " + unreachable, "? " + unreachableUn}, "n2": {"? ready Unknown"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, sim.Config{}, tt.nodes...)
			run(t, cl, 10*time.Second)
			for _, act := range tt.acts {
				if act != nil {
					act(t, cl)
				}
				run(t, cl, time.Minute)
			}
			var from time.Time
			for _, e := range cl.Events() {
				if e.Kind == "Node" && (e.What == "ready Unknown" || e.What == "ready False") {
					from = e.Time
					break
				}
			}
			if from.IsZero() {
				t.Fatalf("no node went Unknown or False: %v", cl.Events())
			}
			for node, want := range tt.want {
				if got := nodeLog(cl, node, from); !matchLog(got, want) {
					t.Errorf("%s: log %v, want %q", node, got, want)
				}
			}
		})
	}
}

func acts(a ...func(*testing.T, *sim.Cluster)) []func(*testing.T, *sim.Cluster) { return a }

func networkDown(node string) func(*testing.T, *sim.Cluster) {
	return func(_ *testing.T, cl *sim.Cluster) {
		cl.Node(node).Runtime().SetCondition(runtime.RuntimeCondition{Type: runtime.NetworkReady, Reason: "NetworkPluginNotReady"})
	}
}

func networkUp(node string) func(*testing.T, *sim.Cluster) {
	return func(_ *testing.T, cl *sim.Cluster) {
		cl.Node(node).Runtime().SetCondition(runtime.RuntimeCondition{Type: runtime.NetworkReady, Status: true})
	}
}

type logLine struct {
	at   time.Duration
	what string
}

// nodeLog is the node's log from from on.
func nodeLog(cl *sim.Cluster, node string, from time.Time) []logLine {
	var out []logLine
	for _, e := range cl.Events() {
		if e.Kind == "Node" && e.Object == node && !e.Time.Before(from) {
			out = append(out, logLine{e.Time.Sub(from), e.What})
		}
	}
	return out
}

// matchLog matches a log against lines "<when> <what>", when being "+d"
// (exactly d after the line before, or after the start for the first),
// "~d" (after the line before, by at most d) or "?" (any time after).
func matchLog(got []logLine, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	var prev time.Duration
	for i, w := range want {
		when, what, _ := strings.Cut(w, " ")
		if got[i].what != what || got[i].at < prev {
			return false
		}
		if when != "?" {
			d, err := time.ParseDuration(when[1:])
			if err != nil {
				panic(err)
			}
			gap := got[i].at - prev
			if when[0] == '+' && gap != d || when[0] == '~' && gap > d {
				return false
			}
		}
		prev = got[i].at
	}
	return true
}

func (l logLine) String() string { return l.at.String() + " " + l.what }
