// Command bench runs the kubelet's PodConfig, apiserver source, GenericPLEG
// and pod workers (k8s.io/kubernetes at the version go.mod pins) and
// nodekit's on the same inputs, in interleaved rounds, and prints the
// medians and the ratios nodekit/kubelet of time, bytes and allocations
// per operation as Markdown.
//
// Run it through run.sh, which passes the overlay that compiles the
// kubelet's pod workers (see internal/kubeletpodworkers).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// figure is one comparison: the same operation on both sides for a given N.
type figure struct {
	name    string
	what    string
	kubelet func(n int) func(b *testing.B)
	nodekit func(n int) func(b *testing.B)
	// lingers marks a figure whose kubelet side cannot be stopped (it
	// stays in memory, with its goroutines, until the process exits): its
	// rounds run after every other figure's, which it would otherwise slow.
	lingers bool
	// workScale multiplies -work for a figure whose operation is so cheap
	// that work/N of them measure for a millisecond or two, within the
	// process's own noise (the PLEG's steady relist: 65 µs at 1,000 pods).
	workScale int
}

type sample struct{ ns, cpu, bytes, allocs float64 }

func main() {
	testing.Init()
	rounds := flag.Int("rounds", 9, "interleaved rounds; medians are reported")
	sizes := flag.String("sizes", "100,1000,10000", "numbers of pods")
	work := flag.Int("work", 20000, "pods handled per benchmark and round: a benchmark at N pods runs work/N operations (at least -min-ops)")
	minOps := flag.Int("min-ops", 10, "operations per benchmark and round at least")
	only := flag.String("run", "", "run only the figures whose name matches this regular expression")
	side := flag.String("side", "", "run only this side, kubelet or nodekit, and report nothing: for profiles")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -cpuprofile: %v\n", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}

	// The kubelet logs through klog; at -v=0 (the default) nothing below
	// is written, as in a kubelet run without -v.
	klog.InitFlags(nil)
	_ = flag.Set("v", "0")
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)

	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench: bad size %q\n", s)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	re, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: -run: %v\n", err)
		os.Exit(2)
	}
	var figs []figure
	for _, f := range figures() {
		if re.MatchString(f.name) {
			figs = append(figs, f)
		}
	}

	// results[figure][n][side] holds one sample per round.
	results := make(map[string]map[int][2][]sample)
	for _, f := range figs {
		results[f.name] = make(map[int][2][]sample)
	}
	// Figures that linger run last, all their rounds after the others'.
	slices.SortStableFunc(figs, func(a, b figure) int {
		switch {
		case a.lingers == b.lingers:
			return 0
		case b.lingers:
			return -1
		}
		return 1
	})
	var phases [][]figure
	for i, f := range figs {
		if f.lingers {
			phases = append(phases, figs[:i], figs[i:])
			break
		}
	}
	if phases == nil {
		phases = [][]figure{figs}
	}
	for _, phase := range phases {
		for r := 0; r < *rounds; r++ {
			for _, f := range phase {
				for _, n := range ns {
					sides := [2]func(int) func(*testing.B){f.kubelet, f.nodekit}
					order := []int{0, 1}
					if r%2 == 1 { // alternate which side runs first
						order = []int{1, 0}
					}
					switch *side {
					case "kubelet":
						order = []int{0}
					case "nodekit":
						order = []int{1}
					}
					got := results[f.name][n]
					for _, side := range order {
						// A fixed number of operations per N: the setup each
						// operation excludes (building pods, collecting
						// garbage) would make a time target costly at N=10,000.
						// At least 10: with 3, the first operation after the
						// setup, its caches cold, weighed on the median
						// (PLEG steady relist at 10,000 pods: 1.2-1.5 ms
						// a relist with 3, 0.74-0.78 ms with 20).
						_ = flag.Set("test.benchtime", fmt.Sprintf("%dx", max(*minOps, *work*max(1, f.workScale)/n)))
						runtime.GC()
						res := testing.Benchmark(sides[side](n))
						if res.N == 0 {
							fmt.Fprintf(os.Stderr, "bench: %s N=%d side %d failed\n", f.name, n, side)
							os.Exit(1)
						}
						got[side] = append(got[side], sample{
							ns:     float64(res.T.Nanoseconds()) / float64(res.N),
							cpu:    res.Extra["cpu-ns/op"],
							bytes:  float64(res.MemBytes) / float64(res.N),
							allocs: float64(res.MemAllocs) / float64(res.N),
						})
					}
					results[f.name][n] = got
					fmt.Fprintf(os.Stderr, "round %d/%d %s N=%d done\n", r+1, *rounds, f.name, n)
				}
			}
		}
	}
	if *side != "" {
		return
	}
	report(os.Stdout, figs, ns, results, *rounds, *work, *minOps)
}

func median(ss []sample, get func(sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = get(s)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// growth is the median and range of the per-round ratios of CPU time per
// operation, large over small.
func growth(small, large []sample) string {
	n := min(len(small), len(large))
	if n == 0 {
		return "–"
	}
	r := make([]sample, n)
	for i := range r {
		r[i].cpu = large[i].cpu / small[i].cpu
	}
	get := func(s sample) float64 { return s.cpu }
	lo, hi := r[0].cpu, r[0].cpu
	for _, x := range r {
		lo, hi = min(lo, x.cpu), max(hi, x.cpu)
	}
	return fmt.Sprintf("%.1f× (%.1f–%.1f)", median(r, get), lo, hi)
}

func report(w io.Writer, figs []figure, ns []int, results map[string]map[int][2][]sample, rounds, work, minOps int) {
	getNs := func(s sample) float64 { return s.ns }
	getCPU := func(s sample) float64 { return s.cpu }
	getB := func(s sample) float64 { return s.bytes }
	getA := func(s sample) float64 { return s.allocs }
	ratio := func(a, b float64) string {
		if b == 0 {
			if a == 0 {
				return "1"
			}
			return "∞"
		}
		return fmt.Sprintf("%.2f", a/b)
	}

	fmt.Fprintf(w, "Ratios nodekit/kubelet, CPU time · bytes · allocations per operation (medians of %d interleaved rounds of max(%d, %d/N) operations each, 10 times as many for the PLEG's steady relist):\n\n", rounds, minOps, work)
	fmt.Fprint(w, "| figure |")
	for _, n := range ns {
		fmt.Fprintf(w, " N=%d |", n)
	}
	fmt.Fprint(w, "\n|---|")
	for range ns {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, f := range figs {
		fmt.Fprintf(w, "| %s |", f.what)
		for _, n := range ns {
			s := results[f.name][n]
			k, o := s[0], s[1]
			fmt.Fprintf(w, " %s · %s · %s |", ratio(median(o, getCPU), median(k, getCPU)),
				ratio(median(o, getB), median(k, getB)), ratio(median(o, getA), median(k, getA)))
		}
		fmt.Fprintln(w)
	}

	if len(ns) > 1 {
		fmt.Fprintf(w, "\nGrowth of CPU time per operation from N=%d to N=%d (linear is %.0f×): the median of the rounds' ratios, each of two measurements taken one after the other, which cancels the machine's drift between rounds; the rounds' lowest and highest in brackets:\n\n", ns[len(ns)-2], ns[len(ns)-1], float64(ns[len(ns)-1])/float64(ns[len(ns)-2]))
		fmt.Fprintln(w, "| figure | kubelet | nodekit |")
		fmt.Fprintln(w, "|---|---|---|")
		a, b := ns[len(ns)-2], ns[len(ns)-1]
		for _, f := range figs {
			s := results[f.name]
			fmt.Fprintf(w, "| %s | %s | %s |\n", f.what, growth(s[a][0], s[b][0]), growth(s[a][1], s[b][1]))
		}
	}

	fmt.Fprintln(w, "\nMedians per operation (CPU time of the whole process while measured; wall time varies with the machine's load):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| figure | N | kubelet cpu-ns | wall ns | B | allocs | nodekit cpu-ns | wall ns | B | allocs |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, f := range figs {
		for _, n := range ns {
			s := results[f.name][n]
			k, o := s[0], s[1]
			fmt.Fprintf(w, "| `%s` | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", f.name, n,
				median(k, getCPU), median(k, getNs), median(k, getB), median(k, getA),
				median(o, getCPU), median(o, getNs), median(o, getB), median(o, getA))
		}
	}
}

func figures() []figure {
	return []figure{
		{name: "podconfig/set", what: "PodConfig first SET (nodekit: pods shared)", kubelet: kubeletSet, nodekit: nodekitSet(false)},
		{name: "podconfig/set-copy", what: "PodConfig first SET, nodekit with CopyPods (kubelet semantics)", kubelet: kubeletSet, nodekit: nodekitSet(true)},
		{name: "podconfig/set-one-changed", what: "PodConfig SET, one pod changed", kubelet: kubeletSetOneChanged, nodekit: nodekitSetOneChanged},
		{name: "apiserver/one-change", what: "apiserver source, one change",
			kubelet: kubeletApiserverOneChange(kubeletAPISides{}), nodekit: nodekitApiserverOneChange, lingers: true},
		{name: "pleg/first", what: "PLEG first relist (nodekit: default inspection)", kubelet: kubeletRelistFirst, nodekit: nodekitRelistFirst(0)},
		{name: "pleg/first-serial", what: "PLEG first relist, nodekit serial inspection", kubelet: kubeletRelistFirst, nodekit: nodekitRelistFirst(1)},
		{name: "pleg/steady", what: "PLEG steady relist", kubelet: kubeletRelistSteady, nodekit: nodekitRelistSteady, workScale: 10},
		{name: "podworkers/round", what: "pod workers, one UpdatePod round", kubelet: kubeletWorkersRound, nodekit: nodekitWorkersRound},
	}
}
