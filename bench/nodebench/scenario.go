package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// podTimes is what the watch saw of one pod, in the driver's clock.
type podTimes struct {
	created   time.Time // the create call was issued
	scheduled time.Time // spec.nodeName first seen set
	running   time.Time // phase Running first seen
	deleted   time.Time // the DELETED event
	restarts  int32
}

// tracker keeps podTimes from a watch on the run's pods.
type tracker struct {
	mu   sync.Mutex
	pods map[string]*podTimes
}

func (t *tracker) get(name string) *podTimes {
	p := t.pods[name]
	if p == nil {
		p = &podTimes{}
		t.pods[name] = p
	}
	return p
}

func (t *tracker) markCreated(name string, at time.Time) {
	t.mu.Lock()
	t.get(name).created = at
	t.mu.Unlock()
}

func (t *tracker) observe(typ watch.EventType, pod *v1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.get(pod.Name)
	if typ == watch.Deleted {
		if p.deleted.IsZero() {
			p.deleted = now
		}
		return
	}
	if pod.Spec.NodeName != "" && p.scheduled.IsZero() {
		p.scheduled = now
	}
	if pod.Status.Phase == v1.PodRunning && p.running.IsZero() {
		p.running = now
	}
	var r int32
	for _, cs := range pod.Status.ContainerStatuses {
		r += cs.RestartCount
	}
	p.restarts = r
}

// all reports whether cond holds for every named pod.
func (t *tracker) all(names []string, cond func(*podTimes) bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range names {
		p := t.pods[n]
		if p == nil || !cond(p) {
			return false
		}
	}
	return true
}

func (t *tracker) copyOf(names []string) []podTimes {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]podTimes, 0, len(names))
	for _, n := range names {
		if p := t.pods[n]; p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// watchPods runs a watch on the pods labelled run=id in ns until ctx ends.
func watchPods(ctx context.Context, cs kubernetes.Interface, ns, id string, t *tracker) (<-chan struct{}, error) {
	sel := "nodebench=" + id
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return cs.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				if pod, ok := ev.Object.(*v1.Pod); ok {
					t.observe(ev.Type, pod, time.Now())
				}
			}
		}
	}()
	return done, nil
}

// spec is what a scenario's pods run.
type podKind int

const (
	podSleep  podKind = iota // sleeps, ends on SIGTERM
	podProbed                // sleeps, with an exec readiness probe
	podCrash                 // exits 1 at once, restartPolicy Always
)

func (d *driver) pod(name string, kind podKind) *v1.Pod {
	grace := int64(30)
	c := v1.Container{
		Name:            "c",
		Image:           d.image,
		ImagePullPolicy: v1.PullIfNotPresent,
		// TERM ends the wait (sleep as pid 1 of its namespace would
		// ignore it and hold the pod for its grace period).
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 36000 & wait"},
	}
	switch kind {
	case podProbed:
		c.ReadinessProbe = &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
			PeriodSeconds: 10,
		}
	case podCrash:
		c.Command = []string{"sh", "-c", "exit 1"}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nodebench": d.id}},
		Spec: v1.PodSpec{
			Containers:                    []v1.Container{c},
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": d.node},
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 v1.RestartPolicyAlways,
		},
	}
}

type driver struct {
	cs       kubernetes.Interface
	ns, node string
	id       string
	image    string
	t        *tracker
	timeout  time.Duration
	// cri reads the CRI proxy's counts (empty without a proxy)
	cri func() map[string]int64
}

func (d *driver) create(ctx context.Context, name string, kind podKind) error {
	d.t.markCreated(name, time.Now())
	_, err := d.cs.CoreV1().Pods(d.ns).Create(ctx, d.pod(name, kind), metav1.CreateOptions{})
	return err
}

func (d *driver) delete(ctx context.Context, name string) error {
	err := d.cs.CoreV1().Pods(d.ns).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// parallel runs f on every name, at most 50 at once.
func parallel(names []string, f func(string) error) error {
	sem := make(chan struct{}, 50)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(n); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

func (d *driver) waitAll(ctx context.Context, what string, names []string, cond func(*podTimes) bool) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !d.t.all(names, cond) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods not %s in %s", len(names), what, d.timeout)
		case <-tick.C:
		}
	}
	return nil
}

func isRunning(p *podTimes) bool { return !p.running.IsZero() }
func isDeleted(p *podTimes) bool { return !p.deleted.IsZero() }

// deleteAll deletes names and returns the time from the first delete call
// to the last DELETED event.
func (d *driver) deleteAll(ctx context.Context, names []string) (time.Duration, error) {
	start := time.Now()
	if err := parallel(names, func(n string) error { return d.delete(ctx, n) }); err != nil {
		return 0, err
	}
	if err := d.waitAll(ctx, "deleted", names, isDeleted); err != nil {
		return 0, err
	}
	return lastOf(d.t.copyOf(names), func(p podTimes) time.Time { return p.deleted }).Sub(start), nil
}

func lastOf(ps []podTimes, at func(podTimes) time.Time) time.Time {
	var last time.Time
	for _, p := range ps {
		if t := at(p); t.After(last) {
			last = t
		}
	}
	return last
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// phases are the instants a scenario reports: its measured window and
// what the result carries besides.
type phases struct {
	windowStart, windowEnd time.Time
	allRunning             time.Duration
	allDeleted             time.Duration
	criStart, criEnd       map[string]int64
	pods                   []string
	notes                  []string
}

// burst creates n pods at once, waits until all run, deletes them all.
func (d *driver) burst(ctx context.Context, n int) (phases, error) {
	ps := names(d.id, n)
	c0 := d.cri()
	start := time.Now()
	if err := parallel(ps, func(name string) error { return d.create(ctx, name, podSleep) }); err != nil {
		return phases{}, err
	}
	if err := d.waitAll(ctx, "Running", ps, isRunning); err != nil {
		return phases{}, err
	}
	allRunning := lastOf(d.t.copyOf(ps), func(p podTimes) time.Time { return p.running }).Sub(start)
	del, err := d.deleteAll(ctx, ps)
	if err != nil {
		return phases{}, err
	}
	return phases{windowStart: start, windowEnd: time.Now(), allRunning: allRunning, allDeleted: del, pods: ps, criStart: c0, criEnd: d.cri()}, nil
}

// churn creates rate pods a second for dur, deleting the oldest to keep
// alive pods, then deletes the rest.
func (d *driver) churn(ctx context.Context, rate float64, alive int, dur time.Duration) (phases, error) {
	c0 := d.cri()
	start := time.Now()
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var all, live []string
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	report := func(err error) {
		if err != nil {
			select {
			case errs <- err:
			default:
			}
		}
	}
	for i := 0; time.Since(start) < dur; i++ {
		select {
		case <-ctx.Done():
			return phases{}, ctx.Err()
		case err := <-errs:
			return phases{}, err
		case <-tick.C:
		}
		name := fmt.Sprintf("%s-%05d", d.id, i)
		all, live = append(all, name), append(live, name)
		wg.Add(1)
		go func() { defer wg.Done(); report(d.create(ctx, name, podSleep)) }()
		if len(live) > alive {
			old := live[0]
			live = live[1:]
			wg.Add(1)
			go func() { defer wg.Done(); report(d.delete(ctx, old)) }()
		}
	}
	wg.Wait()
	// the last pods get to start before they go
	_ = d.waitAll(ctx, "Running", live, isRunning)
	del, err := d.deleteAll(ctx, live)
	if err != nil {
		return phases{}, err
	}
	ph := phases{windowStart: start, windowEnd: time.Now(), allDeleted: del, pods: all, criStart: c0, criEnd: d.cri()}
	if err := d.waitAll(ctx, "deleted", all, isDeleted); err != nil {
		return phases{}, err
	}
	notRun := 0
	for _, p := range d.t.copyOf(all) {
		if p.running.IsZero() {
			notRun++
		}
	}
	if notRun > 0 {
		ph.notes = append(ph.notes, fmt.Sprintf("%d of %d pods deleted before seen Running", notRun, len(all)))
	}
	return ph, nil
}

// rest starts n probed pods and measures the agent over dur while they
// run; the window is the rest only.
func (d *driver) rest(ctx context.Context, n int, dur time.Duration) (phases, error) {
	ps := names(d.id, n)
	start := time.Now()
	if err := parallel(ps, func(name string) error { return d.create(ctx, name, podProbed) }); err != nil {
		return phases{}, err
	}
	if err := d.waitAll(ctx, "Running", ps, isRunning); err != nil {
		return phases{}, err
	}
	allRunning := lastOf(d.t.copyOf(ps), func(p podTimes) time.Time { return p.running }).Sub(start)
	// the first probes and the Ready writes settle before the window opens
	if err := sleepCtx(ctx, 15*time.Second); err != nil {
		return phases{}, err
	}
	c0, ws := d.cri(), time.Now()
	if err := sleepCtx(ctx, dur); err != nil {
		return phases{}, err
	}
	c1, we := d.cri(), time.Now()
	del, err := d.deleteAll(ctx, ps)
	if err != nil {
		return phases{}, err
	}
	return phases{windowStart: ws, windowEnd: we, allRunning: allRunning, allDeleted: del, pods: ps, criStart: c0, criEnd: c1}, nil
}

// crashLoop starts n pods whose container exits at once and keeps them for
// dur (the back-off bookkeeping), then deletes them.
func (d *driver) crashLoop(ctx context.Context, n int, dur time.Duration) (phases, error) {
	ps := names(d.id, n)
	c0, start := d.cri(), time.Now()
	if err := parallel(ps, func(name string) error { return d.create(ctx, name, podCrash) }); err != nil {
		return phases{}, err
	}
	if err := sleepCtx(ctx, dur); err != nil {
		return phases{}, err
	}
	c1, we := d.cri(), time.Now()
	var restarts int32
	for _, p := range d.t.copyOf(ps) {
		restarts += p.restarts
	}
	del, err := d.deleteAll(ctx, ps)
	if err != nil {
		return phases{}, err
	}
	return phases{windowStart: start, windowEnd: we, allDeleted: del, pods: ps, criStart: c0, criEnd: c1,
		notes: []string{fmt.Sprintf("%d restarts seen in %s", restarts, dur)}}, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// percentiles returns p50, p90 and p99 of ds in seconds (nearest rank).
func percentiles(ds []time.Duration) []float64 {
	if len(ds) == 0 {
		return nil
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	out := make([]float64, 0, 3)
	for _, q := range []float64{0.50, 0.90, 0.99} {
		i := int(q*float64(len(ds))+0.999999) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(ds) {
			i = len(ds) - 1
		}
		out = append(out, ds[i].Seconds())
	}
	return out
}
