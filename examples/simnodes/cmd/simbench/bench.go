package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

type options struct {
	kubeconfig, impl, simnodes, simnodesArgs, kwok, kwokConfig, audit, apiserverPID, workdir, out, load string
	nodes, shards, podsPerNode                                                                          int
	rest, settle                                                                                        time.Duration
	correctness, kill                                                                                   bool
}

// result is one run's figures.
type result struct {
	Impl        string  `json:"impl"`
	Nodes       int     `json:"nodes"`
	Shards      int     `json:"shards"`
	Pods        int     `json:"pods"`
	Load        string  `json:"load,omitempty"`
	NodesReadyS float64 `json:"nodesReadySeconds"`
	PodsRunS    float64 `json:"podsRunningSeconds"`
	// CPU seconds and peak RSS of the simulator's processes (summed),
	// total and per node; the apiserver's too.
	SimCPUS          float64 `json:"simCPUSeconds"`
	SimRSSMiB        float64 `json:"simPeakRSSMiB"`
	APIServerCPUS    float64 `json:"apiserverCPUSeconds,omitempty"`
	APIServerRSSMiB  float64 `json:"apiserverPeakRSSMiB,omitempty"`
	RestCPUPerNodeMs float64 `json:"restCPUPerNodeMsPerMinute"`
	// Requests of the simulator per node-minute, by verb and resource.
	RestNodes   map[string]float64 `json:"restNodesOnly"`
	RestPods    map[string]float64 `json:"restWithPods"`
	Rollout     map[string]float64 `json:"rollout"`
	Correctness map[string]string  `json:"correctness,omitempty"`
	Notes       []string           `json:"notes,omitempty"`
}

type sim struct {
	procs []*exec.Cmd
	ua    string // the simulator's user agent prefix in the audit log
	label string // key=value selecting its Nodes
}

func bench(ctx context.Context, o *options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	cfg.UserAgent = "simbench"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	r := &result{Impl: o.impl, Nodes: o.nodes, Shards: o.shards, Pods: o.nodes * o.podsPerNode, Load: o.load}
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "simbench %s %d: %s\n", o.impl, o.nodes, fmt.Sprintf(format, a...))
	}
	if err := ensureNamespace(ctx, cs, "bench"); err != nil {
		return err
	}

	// A pod informer for the bench's namespaces and a Node informer: the
	// waits read them instead of listing.
	factory := informers.NewSharedInformerFactory(cs, 0)
	podInf, nodeInf := factory.Core().V1().Pods().Informer(), factory.Core().V1().Nodes().Informer()
	defer factory.Shutdown() // after cancel, which stops the informers
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, nodeInf.HasSynced)

	start := time.Now()
	s, err := startSim(ctx, cs, o, logf)
	if err != nil {
		return err
	}
	defer s.stop()
	key, val, _ := strings.Cut(s.label, "=")
	simNodes := func() []*v1.Node {
		var out []*v1.Node
		for _, obj := range nodeInf.GetStore().List() {
			if n := obj.(*v1.Node); n.Labels[key] == val {
				out = append(out, n)
			}
		}
		return out
	}
	if err := waitFor(ctx, 20*time.Minute, "nodes Ready", logf, func() (bool, string) {
		ready := 0
		for _, n := range simNodes() {
			if nodeReady(n) {
				ready++
			}
		}
		return ready == o.nodes, fmt.Sprintf("%d/%d Ready", ready, o.nodes)
	}); err != nil {
		return err
	}
	r.NodesReadyS = time.Since(start).Seconds()
	logf("nodes Ready after %.1fs", r.NodesReadyS)

	// Registration's requests are over before the window at rest.
	sleep(ctx, o.settle)
	cpu0 := s.cpu()
	t0 := time.Now()
	sleep(ctx, o.rest)
	t1 := time.Now()
	r.RestCPUPerNodeMs = (s.cpu() - cpu0) * 1000 / float64(o.nodes) / t1.Sub(t0).Minutes()

	// The rollout.
	replicas := int32(o.nodes * o.podsPerNode)
	dep := deployment("load", replicas, map[string]string{key: val})
	if _, err := cs.AppsV1().Deployments("bench").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return err
	}
	t2 := time.Now()
	running := func() (int, int) {
		run, all := 0, 0
		for _, obj := range podInf.GetStore().List() {
			p := obj.(*v1.Pod)
			if p.Namespace != "bench" || p.Labels["app"] != "load" || p.DeletionTimestamp != nil {
				continue
			}
			all++
			if p.Status.Phase == v1.PodRunning && podReady(p) {
				run++
			}
		}
		return run, all
	}
	if err := waitFor(ctx, 30*time.Minute, "pods Running", logf, func() (bool, string) {
		run, all := running()
		return run == int(replicas), fmt.Sprintf("%d/%d Running and Ready (%d created)", run, replicas, all)
	}); err != nil {
		return err
	}
	t3 := time.Now()
	r.PodsRunS = t3.Sub(t2).Seconds()
	logf("pods Running after %.1fs", r.PodsRunS)
	// The events of the rollout still being posted are not "at rest".
	sleep(ctx, o.settle)
	t3b := time.Now()
	sleep(ctx, o.rest)
	t4 := time.Now()

	// Requests, from the audit log (its last lines may lag a moment).
	sleep(ctx, 2*time.Second)
	counts, err := countAudit(o.audit, s.ua, []window{{t0, t1}, {t2, t3}, {t3b, t4}})
	if err != nil {
		return err
	}
	perNodeMin := func(c map[string]int, from, to time.Time) map[string]float64 {
		out := map[string]float64{}
		for k, n := range c {
			out[k] = float64(n) / float64(o.nodes) / to.Sub(from).Minutes()
		}
		return out
	}
	r.RestNodes = perNodeMin(counts[0], t0, t1)
	r.Rollout = perNodeMin(counts[1], t2, t3)
	r.RestPods = perNodeMin(counts[2], t3b, t4)

	if o.correctness {
		r.Correctness = correctness(ctx, cs, podInf, simNodes()[0].Name, logf)
	}
	r.SimCPUS, r.SimRSSMiB = s.cpu(), s.rss()
	if o.apiserverPID != "" {
		if b, err := os.ReadFile(o.apiserverPID); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				r.APIServerCPUS, r.APIServerRSSMiB = procCPU(pid), procRSS(pid)
			}
		}
	}
	if o.kill {
		killRows(ctx, cs, o, s, simNodes, podInf, r, logf)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if o.out == "" {
		_, err = os.Stdout.Write(append(b, '\n'))
		return err
	}
	return os.WriteFile(o.out, append(b, '\n'), 0o644)
}

// killRows kills the last shard (or the simulator) and times its Nodes to
// NotReady and, when other Nodes stay Ready, its pods to eviction (a
// deletionTimestamp from the taint eviction controller).
func killRows(ctx context.Context, cs kubernetes.Interface, o *options, s *sim, simNodes func() []*v1.Node, podInf cache.SharedIndexInformer, r *result, logf func(string, ...any)) {
	if r.Correctness == nil {
		r.Correctness = map[string]string{}
	}
	victim := s.procs[len(s.procs)-1]
	_ = victim.Process.Signal(syscall.SIGKILL)
	_ = victim.Wait()
	killed := time.Now()
	// The killed shard's nodes: the last block of names.
	all := simNodes()
	names := map[string]bool{}
	from := (len(s.procs) - 1) * o.nodes / len(s.procs)
	for _, n := range all {
		if idx := nodeIndex(n.Name); idx >= from {
			names[n.Name] = true
		}
	}
	err := waitFor(ctx, 5*time.Minute, "killed nodes NotReady", logf, func() (bool, string) {
		nr := 0
		for _, n := range simNodes() {
			if names[n.Name] && !nodeReady(n) {
				nr++
			}
		}
		return nr == len(names), fmt.Sprintf("%d/%d NotReady", nr, len(names))
	})
	row := "node NotReady after its simulator process is killed"
	if err != nil {
		r.Correctness[row] = "no: " + err.Error()
		return
	}
	r.Correctness[row] = fmt.Sprintf("yes: %d Nodes NotReady %.0fs after the kill", len(names), time.Since(killed).Seconds())
	if len(names) == o.nodes {
		r.Notes = append(r.Notes, "one process: its kill leaves no Node Ready, and the node lifecycle controller evicts nothing in a zone fully disrupted")
		return
	}
	row = "a killed shard's pods evicted by the node lifecycle controller"
	err = waitFor(ctx, 10*time.Minute, "killed shard's pods evicted", logf, func() (bool, string) {
		left, evicted := 0, 0
		for _, obj := range podInf.GetStore().List() {
			p := obj.(*v1.Pod)
			if p.Namespace != "bench" || !names[p.Spec.NodeName] {
				continue
			}
			if p.DeletionTimestamp != nil {
				evicted++
			} else {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d evicted, %d left", evicted, left)
	})
	if err != nil {
		r.Correctness[row] = "no: " + err.Error()
		return
	}
	r.Correctness[row] = fmt.Sprintf("yes: every pod of the %d killed Nodes marked for deletion %.0fs after the kill", len(names), time.Since(killed).Seconds())
}

// nodeIndex is the number at the end of a node's name.
func nodeIndex(name string) int {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	n, _ := strconv.Atoi(name[i:])
	return n
}

func startSim(ctx context.Context, cs kubernetes.Interface, o *options, logf func(string, ...any)) (*sim, error) {
	s := &sim{}
	open := func(name string) (*os.File, error) { return os.Create(filepath.Join(o.workdir, name)) }
	switch o.impl {
	case "nodekit":
		s.ua, s.label = "nodekit-simnodes", "nodekit.io/simnode=nk"
		for i := range o.shards {
			f, err := open(fmt.Sprintf("simnodes-%d.log", i))
			if err != nil {
				return nil, err
			}
			args := []string{"-kubeconfig", o.kubeconfig, "-nodes", strconv.Itoa(o.nodes),
				"-shard", fmt.Sprintf("%d/%d", i, o.shards), "-name-prefix", "nk-", "-qps", "200", "-burst", "400"}
			cmd := exec.Command(o.simnodes, append(args, strings.Fields(o.simnodesArgs)...)...)
			cmd.Stdout, cmd.Stderr = f, f
			if err := cmd.Start(); err != nil {
				return nil, err
			}
			s.procs = append(s.procs, cmd)
		}
	case "kwok":
		s.ua, s.label = "kwok", "type=kwok"
		if err := createKwokNodes(ctx, cs, o.nodes); err != nil {
			return nil, err
		}
		f, err := open("kwok.log")
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(o.kwok, "--kubeconfig", o.kubeconfig, "--config", o.kwokConfig,
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--node-lease-duration-seconds=40", "--cidr=10.0.0.1/8", "--node-ip=172.31.0.1")
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		s.procs = append(s.procs, cmd)
	default:
		return nil, fmt.Errorf("-impl %q: want nodekit or kwok", o.impl)
	}
	logf("started %d process(es)", len(s.procs))
	return s, nil
}

func (s *sim) stop() {
	for _, p := range s.procs {
		if p.ProcessState == nil {
			_ = p.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = p.Process.Kill()
				<-done
			}
		}
	}
}

func (s *sim) cpu() float64 {
	t := 0.0
	for _, p := range s.procs {
		if p.ProcessState == nil {
			t += procCPU(p.Process.Pid)
		}
	}
	return t
}

func (s *sim) rss() float64 {
	t := 0.0
	for _, p := range s.procs {
		if p.ProcessState == nil {
			t += procRSS(p.Process.Pid)
		}
	}
	return t
}

// procCPU is the user and system CPU seconds of pid.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// procRSS is the peak RSS (VmHWM) of pid in MiB.
func procRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func createKwokNodes(ctx context.Context, cs kubernetes.Interface, n int) error {
	var wg sync.WaitGroup
	var failed atomic.Value
	next := atomic.Int64{}
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				name := fmt.Sprintf("kw-%0*d", len(strconv.Itoa(n-1)), i)
				node := &v1.Node{
					ObjectMeta: metav1.ObjectMeta{Name: name,
						Labels:      map[string]string{"type": "kwok", v1.LabelHostname: name, v1.LabelOSStable: "linux", v1.LabelArchStable: "amd64"},
						Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
					Status: v1.NodeStatus{
						Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("256Gi"),
							v1.ResourcePods: resource.MustParse("110")},
						Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("256Gi"),
							v1.ResourcePods: resource.MustParse("110")},
					},
				}
				if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return err
	}
	return nil
}

func deployment(name string, replicas int32, nodeSelector map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	tolerate := func(key string) v1.Toleration {
		return v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](10)}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					NodeSelector:                  nodeSelector,
					TerminationGracePeriodSeconds: ptr.To[int64](5),
					// A short toleration of not-ready and unreachable, so a
					// killed shard's pods are evicted within the run.
					Tolerations: []v1.Toleration{tolerate(v1.TaintNodeNotReady), tolerate(v1.TaintNodeUnreachable)},
					Containers: []v1.Container{{
						Name: "app", Image: "registry.local/app:1",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("16Mi")}},
					}},
				},
			},
		},
	}
}

func ensureNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func waitFor(ctx context.Context, timeout time.Duration, what string, logf func(string, ...any), cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	lastLog := time.Now()
	for {
		ok, state := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v: %s", what, timeout, state)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(lastLog) > 15*time.Second {
			logf("waiting for %s: %s", what, state)
			lastLog = time.Now()
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

var _ = intstr.FromInt32
