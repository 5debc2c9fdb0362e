package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

var scenarioOrder = []string{"burst", "churn", "rest", "crashloop"}

const (
	nodekitAgent = "kubenode"
	kubeletAgent = "kubelet"
)

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// report writes the markdown tables of the results in dir: the median
// over rounds of each figure, for each agent, and the ratio.
func report(w io.Writer, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	runs := map[string]map[string][]result{} // scenario → agent → rounds
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if runs[r.Scenario] == nil {
			runs[r.Scenario] = map[string][]result{}
		}
		runs[r.Scenario][r.Agent] = append(runs[r.Scenario][r.Agent], r)
	}
	if len(runs) == 0 {
		return fmt.Errorf("no results in %s", dir)
	}
	fmt.Fprintln(w, "| scenario | figure (median of rounds) | kubelet | kubenode | kubenode / kubelet |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	var notes []string
	for _, sc := range scenarioOrder {
		byAgent := runs[sc]
		if byAgent == nil {
			continue
		}
		kl, nk := byAgent[kubeletAgent], byAgent[nodekitAgent]
		pods, window, rounds := 0, 0.0, max(len(kl), len(nk))
		for _, r := range append(append([]result(nil), kl...), nk...) {
			pods, window = max(pods, r.Pods), max(window, r.WindowSec)
		}
		label := fmt.Sprintf("**%s** (%d pods, %d round(s))", sc, pods, rounds)
		if sc == "rest" || sc == "crashloop" || sc == "churn" {
			label = fmt.Sprintf("**%s** (%d pods, %.0f s window, %d round(s))", sc, pods, window, rounds)
		}
		type fig struct {
			name string
			get  func(result) []float64
			unit string
			skip bool
		}
		mb := func(b int64) float64 { return float64(b) / 1e6 }
		figs := []fig{
			{"creation → Running seen, p50 / p90 / p99", func(r result) []float64 { return r.Startup }, "s", sc == "crashloop"},
			{"scheduled seen → Running seen (SLI), p50 / p90 / p99", func(r result) []float64 { return r.SLI }, "s", sc == "crashloop"},
			{"all Running after the first create", func(r result) []float64 { return []float64{r.AllRunning} }, "s", sc == "churn" || sc == "crashloop"},
			{"all deleted after the first delete", func(r result) []float64 { return []float64{r.AllDeleted} }, "s", false},
			{"agent CPU in the window", func(r result) []float64 { return []float64{r.CPUSec} }, "s", false},
			{"agent RSS peak / steady", func(r result) []float64 { return []float64{mb(r.PeakRSS), mb(r.SteadyRSS)} }, "MB", false},
			{"apiserver requests in the window", func(r result) []float64 { return []float64{float64(r.APITotal)} }, "", false},
			{"CRI calls per pod in the window", func(r result) []float64 { return []float64{r.CRIPerPod} }, "", false},
		}
		for i, f := range figs {
			if f.skip {
				continue
			}
			a, b := medians(kl, f.get), medians(nk, f.get)
			first := ""
			if i == 0 || (sc == "crashloop" && i == 3) {
				first = label
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", first, withUnit(f.name, f.unit), join(a, "%.2f"), join(b, "%.2f"), ratios(b, a))
		}
		for _, rs := range [][]result{kl, nk} {
			for _, r := range rs {
				for _, n := range r.Notes {
					notes = append(notes, fmt.Sprintf("%s, %s, round %d: %s", sc, r.Agent, r.Round, n))
				}
			}
		}
	}
	breakdowns := []struct {
		title string
		of    func(result) map[string]int64
	}{
		{"Apiserver requests by verb and resource (median of rounds; the node's own user in the audit log):", func(r result) map[string]int64 { return r.API }},
		{"CRI calls by method (median of rounds, all pods of the window):", func(r result) map[string]int64 { return r.CRI }},
	}
	for _, bd := range breakdowns {
		fmt.Fprintln(w)
		fmt.Fprintln(w, bd.title)
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| scenario | kubelet | kubenode |")
		fmt.Fprintln(w, "|---|---|---|")
		for _, sc := range scenarioOrder {
			if runs[sc] == nil {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s |\n", sc, breakdown(runs[sc][kubeletAgent], bd.of), breakdown(runs[sc][nodekitAgent], bd.of))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	return nil
}

func withUnit(name, unit string) string {
	if unit == "" {
		return name
	}
	return name + " (" + unit + ")"
}

// medians is the per-component median over rounds of get.
func medians(rs []result, get func(result) []float64) []float64 {
	var cols [][]float64
	for _, r := range rs {
		for i, v := range get(r) {
			for len(cols) <= i {
				cols = append(cols, nil)
			}
			cols[i] = append(cols[i], v)
		}
	}
	out := make([]float64, len(cols))
	for i, c := range cols {
		out[i] = median(c)
	}
	return out
}

func join(xs []float64, format string) string {
	if len(xs) == 0 {
		return "–"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(s, " / ")
}

func ratios(num, den []float64) string {
	if len(num) == 0 || len(num) != len(den) {
		return "–"
	}
	s := make([]string, len(num))
	for i := range num {
		if den[i] == 0 {
			s[i] = "–"
			continue
		}
		s[i] = fmt.Sprintf("%.2f", num[i]/den[i])
	}
	return strings.Join(s, " / ")
}

// breakdown lists the medians of rs's counts, largest first.
func breakdown(rs []result, get func(result) map[string]int64) string {
	if len(rs) == 0 {
		return "–"
	}
	keys := map[string][]float64{}
	for _, r := range rs {
		for k := range get(r) {
			keys[k] = nil
		}
	}
	for k := range keys {
		for _, r := range rs {
			keys[k] = append(keys[k], float64(get(r)[k]))
		}
	}
	type kv struct {
		k string
		v float64
	}
	var list []kv
	for k, vs := range keys {
		if m := median(vs); m > 0 {
			list = append(list, kv{strings.TrimPrefix(strings.TrimPrefix(k, "/runtime.v1.RuntimeService/"), "/runtime.v1.ImageService/"), m})
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].v > list[j].v || list[i].v == list[j].v && list[i].k < list[j].k })
	s := make([]string, len(list))
	for i, e := range list {
		s[i] = fmt.Sprintf("%s %.0f", e.k, e.v)
	}
	return strings.Join(s, ", ")
}
