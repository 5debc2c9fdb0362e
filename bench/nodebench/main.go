// Command nodebench drives bench/node.sh's whole-agent comparison: the
// scenarios' pods through the apiserver, pod start-up latency from a watch,
// the agent's CPU and memory from /proc, its apiserver requests from the
// audit log and its CRI calls through a counting proxy.
//
//	nodebench proxy -listen SOCK -upstream SOCK -counts SOCK
//	nodebench run -kubeconfig F -node N -agent A -scenario S -pid P ... -out DIR
//	nodebench report DIR   # the markdown tables of every run in DIR
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	if err := mainErr(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "nodebench:", err)
		os.Exit(1)
	}
}

func mainErr(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: nodebench proxy|run|report ...")
	}
	ctx, cancel := signalContext()
	defer cancel()
	switch args[0] {
	case "proxy":
		fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
		listen := fs.String("listen", "", "the proxy's CRI socket")
		upstream := fs.String("upstream", "", "containerd's CRI socket")
		counts := fs.String("counts", "", "socket serving the counts as JSON over HTTP")
		trace := fs.String("trace", "", "file to write each call's method, start and duration to")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *listen == "" || *upstream == "" || *counts == "" {
			return errors.New("proxy: -listen, -upstream and -counts are required")
		}
		return runProxy(ctx, *listen, *upstream, *counts, *trace)
	case "run":
		return runScenario(ctx, args[1:])
	case "report":
		if len(args) != 2 {
			return errors.New("usage: nodebench report DIR")
		}
		return report(os.Stdout, args[1])
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// result is one scenario's run on one agent in one round.
type result struct {
	Agent      string           `json:"agent"`
	Scenario   string           `json:"scenario"`
	Round      int              `json:"round"`
	Pods       int              `json:"pods"`
	WindowSec  float64          `json:"windowSec"`
	Startup    []float64        `json:"startup"` // creation → Running seen, p50 p90 p99 s
	SLI        []float64        `json:"sli"`     // scheduled seen → Running seen
	AllRunning float64          `json:"allRunningSec"`
	AllDeleted float64          `json:"allDeletedSec"`
	CPUSec     float64          `json:"cpuSec"`
	PeakRSS    int64            `json:"peakRSS"`
	SteadyRSS  int64            `json:"steadyRSS"`
	API        map[string]int64 `json:"api"`
	APITotal   int64            `json:"apiTotal"`
	CRI        map[string]int64 `json:"cri"`
	CRITotal   int64            `json:"criTotal"`
	CRIPerPod  float64          `json:"criPerPod"`
	Notes      []string         `json:"notes,omitempty"`
}

func runScenario(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "an admin kubeconfig")
	node := fs.String("node", "", "the node's name")
	agent := fs.String("agent", "", "the agent's name in the results")
	round := fs.Int("round", 1, "the round, for the results")
	scenario := fs.String("scenario", "", "burst, churn, rest or crashloop")
	pods := fs.Int("pods", 0, "pods (burst and rest 110, crashloop 20)")
	rate := fs.Float64("rate", 5, "churn: pods created (and deleted) a second")
	alive := fs.Int("alive", 30, "churn: pods alive at once")
	duration := fs.Duration("duration", 0, "churn 5m, rest 10m, crashloop 3m")
	pid := fs.Int("pid", 0, "the agent's process id")
	counts := fs.String("cri-counts", "", "the CRI proxy's counts socket")
	auditLog := fs.String("audit-log", "", "kube-apiserver's audit log")
	auditUser := fs.String("audit-user", "", "the node's user name in the audit log")
	image := fs.String("image", "registry.k8s.io/e2e-test-images/busybox:1.37.0-2", "the pods' image (present on the node)")
	ns := fs.String("namespace", "nodebench", "the pods' namespace")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long a wait for pods may take")
	out := fs.String("out", ".", "directory for the result (ROUND-AGENT-SCENARIO.json)")
	timeline := fs.Bool("timeline", false, "also write each pod's created, scheduled, running and deleted instants (Unix ns) to ROUND-AGENT-SCENARIO.pods")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" || *node == "" || *agent == "" || *pid == 0 {
		return errors.New("run: -kubeconfig, -node, -agent and -pid are required")
	}
	defaults := map[string]struct {
		pods int
		dur  time.Duration
	}{"burst": {110, 0}, "churn": {0, 5 * time.Minute}, "rest": {110, 10 * time.Minute}, "crashloop": {20, 3 * time.Minute}}
	def, ok := defaults[*scenario]
	if !ok {
		return fmt.Errorf("run: -scenario %q: want burst, churn, rest or crashloop", *scenario)
	}
	if *pods == 0 {
		*pods = def.pods
	}
	if *duration == 0 {
		*duration = def.dur
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.UserAgent = "nodebench"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := ensureNamespace(ctx, cs, *ns); err != nil {
		return err
	}
	id := fmt.Sprintf("%s-%s-r%d", *scenario, *agent, *round)
	t := &tracker{pods: map[string]*podTimes{}}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watched, err := watchPods(wctx, cs, *ns, id, t)
	if err != nil {
		return err
	}
	smp := &sampler{}
	sctx, stopSampler := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); smp.run(sctx, *pid, 250*time.Millisecond) }()
	defer func() { stopSampler(); <-sampled; stopWatch(); <-watched }()
	var criErr error
	d := &driver{cs: cs, ns: *ns, node: *node, id: id, image: *image, t: t, timeout: *timeout,
		cri: func() map[string]int64 {
			if *counts == "" {
				return map[string]int64{}
			}
			m, err := criCounts(ctx, *counts)
			if err != nil && criErr == nil {
				criErr = err
			}
			return m
		}}
	var ph phases
	switch *scenario {
	case "burst":
		ph, err = d.burst(ctx, *pods)
	case "churn":
		ph, err = d.churn(ctx, *rate, *alive, *duration)
	case "rest":
		ph, err = d.rest(ctx, *pods, *duration)
	case "crashloop":
		ph, err = d.crashLoop(ctx, *pods, *duration)
	}
	if err != nil {
		return fmt.Errorf("%s on %s: %w", *scenario, *agent, err)
	}
	if criErr != nil {
		return criErr
	}
	r := result{Agent: *agent, Scenario: *scenario, Round: *round, Pods: len(ph.pods),
		WindowSec: ph.windowEnd.Sub(ph.windowStart).Seconds(), Notes: ph.notes,
		AllRunning: ph.allRunning.Seconds(), AllDeleted: ph.allDeleted.Seconds()}
	var startup, sli []time.Duration
	for _, p := range t.copyOf(ph.pods) {
		if p.running.IsZero() || p.created.IsZero() {
			continue
		}
		startup = append(startup, p.running.Sub(p.created))
		if !p.scheduled.IsZero() {
			sli = append(sli, p.running.Sub(p.scheduled))
		}
	}
	r.Startup, r.SLI = percentiles(startup), percentiles(sli)
	if *timeline {
		if err := writeTimeline(filepath.Join(*out, fmt.Sprintf("%d-%s-%s.pods", *round, *agent, *scenario)), ph.pods, t); err != nil {
			return err
		}
	}
	if r.CPUSec, r.PeakRSS, r.SteadyRSS, err = smp.usage(ph.windowStart, ph.windowEnd); err != nil {
		return fmt.Errorf("agent pid %d: %w", *pid, err)
	}
	r.CRI = diff(ph.criEnd, ph.criStart)
	r.CRITotal = sum(r.CRI)
	if r.Pods > 0 {
		r.CRIPerPod = float64(r.CRITotal) / float64(r.Pods)
	}
	if *auditLog != "" {
		_ = sleepCtx(ctx, 2*time.Second) // the log backend's last writes
		if r.API, err = auditCounts(*auditLog, *auditUser, ph.windowStart, ph.windowEnd); err != nil {
			return err
		}
		r.APITotal = sum(r.API)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(*out, fmt.Sprintf("%d-%s-%s.json", *round, *agent, *scenario))
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "nodebench: %s %s round %d: startup p50/p90/p99 %v s, all Running %.2f s, all deleted %.2f s, CPU %.2f s, peak RSS %.1f MB, API %d, CRI/pod %.1f\n",
		*agent, *scenario, *round, r.Startup, r.AllRunning, r.AllDeleted, r.CPUSec, float64(r.PeakRSS)/1e6, r.APITotal, r.CRIPerPod)
	return nil
}

// ensureNamespace creates ns if missing and waits for its default service
// account (pods are refused without it).
func ensureNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// writeTimeline writes a line per pod: name, then the instants it was
// created, seen scheduled, seen Running and seen deleted (Unix ns, 0 if
// never), to line up with the CRI proxy's trace.
func writeTimeline(path string, names []string, t *tracker) error {
	var b []byte
	ns := func(at time.Time) int64 {
		if at.IsZero() {
			return 0
		}
		return at.UnixNano()
	}
	for i, p := range t.copyOf(names) {
		b = fmt.Appendf(b, "%s %d %d %d %d\n", names[i], ns(p.created), ns(p.scheduled), ns(p.running), ns(p.deleted))
	}
	return os.WriteFile(path, b, 0o644)
}
