package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

const (
	beginMark = "<!-- simbench:begin (bench/simnodes.sh writes this part) -->"
	endMark   = "<!-- simbench:end -->"
)

// writeReport writes the tables of the result files matching globs into
// doc between the marks (appending them, under a heading, if absent).
func writeReport(globs, doc string) error {
	var rs []*result
	for _, g := range strings.Split(globs, ",") {
		files, err := filepath.Glob(g)
		if err != nil {
			return err
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			r := &result{}
			if err := json.Unmarshal(b, r); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return fmt.Errorf("-report %s: no results", globs)
	}
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Nodes != b.Nodes {
			return a.Nodes < b.Nodes
		}
		if a.Impl != b.Impl {
			return a.Impl > b.Impl // nodekit first
		}
		return a.Shards < b.Shards
	})
	var t bytes.Buffer
	t.WriteString(beginMark + "\n\n")
	t.WriteString("| simulator | nodes | processes | pods | nodes Ready | pods Running | sim CPU-s (per node) | sim peak RSS MiB (per node) | CPU at rest, ms per node-minute | apiserver CPU-s, peak RSS MiB |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&t, "| %s | %d | %d | %d | %.0fs | %.0fs | %.0f (%.3f) | %.0f (%.2f) | %.1f | %.0f, %.0f |\n",
			r.Impl, r.Nodes, r.Shards, r.Pods, r.NodesReadyS, r.PodsRunS, r.SimCPUS, r.SimCPUS/float64(r.Nodes),
			r.SimRSSMiB, r.SimRSSMiB/float64(r.Nodes), r.RestCPUPerNodeMs, r.APIServerCPUS, r.APIServerRSSMiB)
	}
	t.WriteString("\nThe simulator's apiserver requests per node-minute (from the audit log, by its user agent), in all and by verb and resource (those at 0.05 or more):\n\n")
	t.WriteString("| simulator | nodes | processes | pods | at rest, nodes only | at rest, with the pods | during the rollout |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&t, "| %s | %d | %d | %d | %s | %s | %s |\n", r.Impl, r.Nodes, r.Shards, r.Pods, verbs(r.RestNodes), verbs(r.RestPods), verbs(r.Rollout))
	}
	t.WriteString("\nThe rollout's requests per pod started (its window's requests over the pods it started: a rate per node-minute grows as a rollout gets faster) " +
		"and the Lease renewals per node-minute during the rollout against at rest (6 when every node renews every 10s):\n\n")
	t.WriteString("| simulator | nodes | processes | pods | rollout requests per pod started | Lease renewals per node-minute, rollout / at rest |\n|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&t, "| %s | %d | %d | %d | %s | %.2f / %.2f |\n", r.Impl, r.Nodes, r.Shards, r.Pods, verbs(perPod(r)),
			r.Rollout["update leases"], r.RestPods["update leases"])
	}
	t.WriteString("\nBehaviour (each run's own checks, on its first node; the kill rows at the end of the run):\n\n")
	t.WriteString("| simulator | nodes | processes | check | result |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		keys := make([]string, 0, len(r.Correctness))
		for k := range r.Correctness {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&t, "| %s | %d | %d | %s | %s |\n", r.Impl, r.Nodes, r.Shards, k, r.Correctness[k])
		}
		for _, n := range r.Notes {
			fmt.Fprintf(&t, "| %s | %d | %d | note | %s |\n", r.Impl, r.Nodes, r.Shards, n)
		}
	}
	loads := map[string]bool{}
	for _, r := range rs {
		if r.Load != "" && !loads[r.Load] {
			loads[r.Load] = true
			fmt.Fprintf(&t, "\nLoad at the start of a run (%s %d): %s\n", r.Impl, r.Nodes, r.Load)
		}
	}
	t.WriteString("\n" + endMark)

	b, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		s = strings.TrimRight(s, "\n") + "\n\n## simnodes: nodekit nodes on a real kube-apiserver, beside kwok\n\n" + t.String() + "\n"
	} else {
		s = s[:i] + t.String() + s[j+len(endMark):]
	}
	return os.WriteFile(doc, []byte(s), 0o644)
}

// perPod turns the rollout's requests per node-minute back into requests
// per pod started.
func perPod(r *result) map[string]float64 {
	if r.Pods == 0 || r.PodsRunS == 0 {
		return nil // a result from before the rollout was timed
	}
	out := make(map[string]float64, len(r.Rollout))
	f := float64(r.Nodes) * r.PodsRunS / 60 / float64(r.Pods)
	for k, v := range r.Rollout {
		out[k] = v * f
	}
	return out
}

// verbs renders counts per node-minute: the total, then each key.
func verbs(m map[string]float64) string {
	if len(m) == 0 {
		return "–"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "total" && m[k] >= 0.05 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	parts := []string{fmt.Sprintf("**%.2f**", m["total"])}
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]))
	}
	return strings.Join(parts, "; ")
}
