package procruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podenv"
	"github.com/nodekit/nodekit/runtime"
)

// Config configures a Runtime.
type Config struct {
	// Root is where container logs go. Required.
	Root string
	// Env builds containers' environments, as runtime/cri's does: env from
	// API objects, fieldRef, resourceFieldRef, $(VAR) expansion. Default:
	// podenv's resolver without API sources.
	Env *podenv.Resolver
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Log defaults to logr.Discard().
	Log logr.Logger
}

// Runtime runs containers as local processes. Close stops them all.
type Runtime struct {
	cfg  Config
	mu   sync.Mutex
	pods map[types.UID]*procPod
	seq  int
	wg   sync.WaitGroup
}

type procPod struct {
	uid             types.UID
	name, namespace string
	sandbox         *runtime.SandboxStatus
	procs           []*proc // oldest first
}

type proc struct {
	id           string
	sandboxID    string
	name         string
	image        string
	hash         uint64
	restartCount int
	cmd          *exec.Cmd
	state        runtime.ContainerState
	created      time.Time
	started      time.Time
	finished     time.Time
	exitCode     int
	reason       string
	done         chan struct{}
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns a Runtime that writes logs under c.Root.
func New(c Config) (*Runtime, error) {
	if c.Root == "" {
		return nil, fmt.Errorf("procruntime: Root: %w", runtime.ErrInvalidConfig)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return &Runtime{cfg: c, pods: map[types.UID]*procPod{}}, nil
}

// Type implements runtime.Runtime.
func (r *Runtime) Type() string { return "proc" }

// Version implements runtime.Runtime.
func (r *Runtime) Version(context.Context) (string, error) { return "0.1.0", nil }

// Status implements runtime.Runtime: processes can always run.
func (r *Runtime) Status(context.Context) (*runtime.RuntimeStatus, error) {
	return &runtime.RuntimeStatus{Conditions: []runtime.RuntimeCondition{
		{Type: runtime.RuntimeReady, Status: true},
		{Type: runtime.NetworkReady, Status: true},
	}}, nil
}

// GetPods implements runtime.Runtime.
func (r *Runtime) GetPods(_ context.Context, all bool) ([]*runtime.Pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*runtime.Pod, 0, len(r.pods))
	for _, p := range r.pods {
		rp := &runtime.Pod{ID: p.uid, Name: p.name, Namespace: p.namespace}
		if p.sandbox != nil && (all || p.sandbox.State == runtime.SandboxStateReady) {
			rp.Sandboxes = []*runtime.Container{{ID: r.id(p.sandbox.ID), State: sandboxState(p.sandbox)}}
			rp.CreatedAt = uint64(p.sandbox.CreatedAt.UnixNano())
		}
		for _, c := range p.procs {
			if all || c.state == runtime.ContainerStateRunning {
				rp.Containers = append(rp.Containers, &runtime.Container{
					ID: r.id(c.id), Name: c.name, Image: c.image, Hash: c.hash, State: c.state,
				})
			}
		}
		if !rp.IsEmpty() {
			out = append(out, rp)
		}
	}
	return out, nil
}

func sandboxState(s *runtime.SandboxStatus) runtime.ContainerState {
	if s.State == runtime.SandboxStateReady {
		return runtime.ContainerStateRunning
	}
	return runtime.ContainerStateExited
}

func (r *Runtime) id(s string) runtime.ContainerID { return runtime.ContainerID{Type: r.Type(), ID: s} }

// GetPodStatus implements runtime.Runtime.
func (r *Runtime) GetPodStatus(_ context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &runtime.PodStatus{ID: uid, Name: name, Namespace: namespace, TimeStamp: r.cfg.Clock.Now()}
	p, ok := r.pods[uid]
	if !ok {
		return st, nil
	}
	if p.sandbox != nil {
		sb := *p.sandbox
		st.SandboxStatuses = []*runtime.SandboxStatus{&sb}
		if sb.State == runtime.SandboxStateReady {
			st.IPs = sb.IPs
		}
	}
	// Newest first, as the contract asks.
	for i := len(p.procs) - 1; i >= 0; i-- {
		c := p.procs[i]
		st.ContainerStatuses = append(st.ContainerStatuses, &runtime.ContainerStatus{
			ID: r.id(c.id), Name: c.name, State: c.state,
			CreatedAt: c.created, StartedAt: c.started, FinishedAt: c.finished,
			ExitCode: c.exitCode, Reason: c.reason, Image: c.image, ImageID: c.image,
			Hash: c.hash, RestartCount: c.restartCount, SandboxID: c.sandboxID,
		})
	}
	return st, nil
}

// KillPod implements runtime.Runtime: TERM to every process, KILL to those
// still running after the grace period, then the sandbox goes.
func (r *Runtime) KillPod(ctx context.Context, pod *v1.Pod, running runtime.Pod, override *int64) error {
	grace := time.Duration(runtime.EffectiveGracePeriod(pod, override)) * time.Second
	r.mu.Lock()
	p, ok := r.pods[running.ID]
	var procs []*proc
	if ok {
		for _, c := range p.procs {
			if c.state == runtime.ContainerStateRunning {
				procs = append(procs, c)
			}
		}
	}
	r.mu.Unlock()
	if !ok {
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, len(procs))
	for i, c := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.stop(ctx, c, grace)
		}()
	}
	wg.Wait()
	r.mu.Lock()
	if p.sandbox != nil {
		p.sandbox.State = runtime.SandboxStateNotReady
	}
	r.mu.Unlock()
	return errors.Join(errs...)
}

// stop sends TERM, waits up to grace, then KILL.
func (r *Runtime) stop(ctx context.Context, c *proc, grace time.Duration) error {
	_ = c.signal(syscall.SIGTERM)
	t := r.cfg.Clock.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return nil
	case <-t.C():
	case <-ctx.Done():
	}
	if err := c.signal(syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill container %q: %w", c.name, err)
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close kills every process and waits for them.
func (r *Runtime) Close() {
	r.mu.Lock()
	for _, p := range r.pods {
		for _, c := range p.procs {
			if c.state == runtime.ContainerStateRunning {
				_ = c.signal(syscall.SIGKILL)
			}
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *Runtime) logPath(pod *v1.Pod, name string, restart int) string {
	return filepath.Join(r.cfg.Root, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), name, strconv.Itoa(restart)+".log")
}

// start runs one container; the step records failures.
func (r *Runtime) start(ctx context.Context, pod *v1.Pod, c *v1.Container, st *runtime.PodStatus, backoff *runtime.Backoff, step *runtime.SyncResult) {
	restart := 0
	if prev := st.FindContainerStatusByName(c.Name); prev != nil {
		restart = prev.RestartCount + 1
		if msg, err := runtime.CrashLoopBackOff(backoff, pod, c, st); err != nil {
			step.Fail(err, msg)
			return
		}
	}
	resolver := r.cfg.Env
	if resolver == nil {
		resolver = podenv.New(podenv.Config{})
	}
	vars, err := resolver.Env(ctx, pod, c, nil)
	if err != nil {
		step.Fail(runtime.ErrCreateContainerConfig, err.Error())
		return
	}
	lookup := podenv.Lookup(vars)
	argv := append(podenv.ExpandAll(c.Command, lookup), podenv.ExpandAll(c.Args, lookup)...)
	if len(argv) == 0 {
		step.Fail(runtime.ErrCreateContainerConfig, "procruntime needs a command: images are not run")
		return
	}
	env := make([]string, 0, len(vars))
	for _, v := range vars {
		env = append(env, v.Name+"="+v.Value)
	}
	logPath := r.logPath(pod, c.Name, restart)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		step.Fail(runtime.ErrCreateContainer, err.Error())
		return
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		step.Fail(runtime.ErrCreateContainer, err.Error())
		return
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, c.WorkingDir, logFile, logFile
	// Its own process group, so that signals reach what it starts, as they
	// reach a whole container.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	r.mu.Lock()
	defer r.mu.Unlock()
	pp := r.pods[pod.UID]
	if pp == nil || pp.sandbox == nil || pp.sandbox.State != runtime.SandboxStateReady {
		logFile.Close()
		step.Fail(runtime.ErrCreateContainer, "pod has no ready sandbox")
		return
	}
	r.seq++
	p := &proc{
		id: strconv.Itoa(r.seq), name: c.Name, image: c.Image, hash: runtime.HashContainer(c),
		restartCount: restart, cmd: cmd, created: r.cfg.Clock.Now(), done: make(chan struct{}),
	}
	p.sandboxID = pp.sandbox.ID
	pp.procs = append(pp.procs, p)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		p.state, p.exitCode, p.reason, p.finished = runtime.ContainerStateExited, 128, "StartError", p.created
		step.Fail(runtime.ErrRunContainer, err.Error())
		return
	}
	p.state, p.started = runtime.ContainerStateRunning, r.cfg.Clock.Now()
	r.wg.Add(1)
	go r.wait(p, logFile)
}

// wait records the process's exit.
func (r *Runtime) wait(p *proc, logFile *os.File) {
	defer r.wg.Done()
	err := p.cmd.Wait()
	// Like a container whose init exits, nothing it started outlives it.
	_ = p.signal(syscall.SIGKILL)
	logFile.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	p.state, p.finished, p.reason = runtime.ContainerStateExited, r.cfg.Clock.Now(), "Completed"
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		p.exitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.exitCode = 128 + int(ws.Signal())
		}
		p.reason = "Error"
	}
	close(p.done)
	r.cfg.Log.V(1).Info("container exited", "container", p.name, "exitCode", p.exitCode)
}

// signal sends sig to the container's process group.
func (p *proc) signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Pods returns the UIDs of the pods the runtime knows, sorted; for tests.
func (r *Runtime) Pods() []types.UID {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]types.UID, 0, len(r.pods))
	for uid := range r.pods {
		out = append(out, uid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
