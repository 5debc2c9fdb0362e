package fake

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/lifecycle"
)

// ErrInjected is wrapped by every error the fault injection produces, so a
// test tells injected failures from real ones with errors.Is.
var ErrInjected = errors.New("fake: injected fault")

// Config configures a Runtime. The zero Config is valid.
type Config struct {
	// Clock drives container lifetimes, latencies, grace periods and the
	// image pull back-off. Default: the real clock.
	Clock clock.Clock
	// Log receives a line per state change. Default: logr.Discard().
	Log logr.Logger
	// RuntimeType is Type() and the type part of every ContainerID.
	// Default: "fake".
	RuntimeType string
	// Version is what Version returns. Default: "0.1.0".
	Version string
	// Seed seeds the fault injection's random source; the same seed and the
	// same sequence of calls give the same failures. Default: 0.
	Seed uint64
	// FailureRates maps method names (see SetFailureRate) to the probability
	// in [0, 1] that a call fails with an error wrapping ErrInjected.
	FailureRates map[string]float64
	// Images are present from the start, as if pulled.
	Images []string
	// ImagePullBackoffInitial and ImagePullBackoffMax bound the fake's own
	// image pull back-off (ImagePullBackOff). Defaults: 10s and 300s, as in
	// the kubelet.
	ImagePullBackoffInitial time.Duration
	ImagePullBackoffMax     time.Duration
	// MaxRecordedCalls bounds the list Calls returns (the oldest calls are
	// dropped); counters are kept regardless. Default: 10000, which a
	// runtime relisted every second fills in an hour or two, to 560 KiB;
	// negative: none is recorded (a simulator's long-running nodes, which
	// nobody asks for their calls).
	MaxRecordedCalls int
	// EventBuffer is how many container events a WatchContainerEvents
	// stream holds before it breaks. Default: 1000.
	EventBuffer int
	// PodCIDR, if set, is the IPv4 network pod sandboxes get their IPs
	// from (as the node's spec.podCIDR): its host addresses in turn,
	// skipping those held by the runtime's sandboxes once it wraps around.
	// Default: 10.x.y.z from the runtime's sequence of IDs.
	PodCIDR string
	// PodBehavior, if set, programs containers per pod (for example from
	// the pod's annotations): when it returns true its Behavior wins over
	// SetContainerBehavior and SetImageBehavior. It is called with the
	// runtime's lock held and must not call the runtime.
	PodBehavior func(pod *v1.Pod, c *v1.Container) (Behavior, bool)
	// Recorder receives the kubelet's runtime-manager events about pods
	// and their containers (Pulling, Pulled, Failed, BackOff, Created,
	// Started, Killing, hook failures, SandboxChanged,
	// FailedCreatePodSandBox), as runtime/cri records them. Default: none.
	Recorder runtime.EventRecorder
}

// Behavior programs how containers behave. It applies to every container
// whose name or image it was set for (SetContainerBehavior wins over
// SetImageBehavior). The zero Behavior is a container that starts and runs
// until it is killed, and exits 0 on TERM.
type Behavior struct {
	// Exit makes a started container exit on its own ExitAfter after it
	// started, with ExitCode (reason "Completed" for 0, else "Error").
	// Evaluated lazily against the clock on every read.
	Exit      bool
	ExitAfter time.Duration
	ExitCode  int
	// StartError makes every start fail. A StartError wrapping
	// runtime.ErrCreateContainer or runtime.ErrCreateContainerConfig leaves
	// no container behind; any other error leaves an exited container (exit
	// code 128, reason "StartError") that counts for crash-loop back-off, as
	// containerd does. The step error wraps runtime.ErrRunContainer unless
	// StartError already wraps a step sentinel.
	StartError error
	// PullError makes pulls of the image fail with this message; SyncPod
	// reports ErrImagePull, then ErrImagePullBackOff while the fake's pull
	// back-off lasts (a runtime.BackOffError with the time left).
	PullError string
	// StartLatency is how long each start takes, on the clock.
	StartLatency time.Duration
	// IgnoreTERM makes the container sit out its grace period when killed;
	// it is then killed with exit code 137 (reason "Error").
	IgnoreTERM bool
	// TermExitCode is the exit code when it stops on TERM. Default 0.
	TermExitCode int
	// Logs are lines the container prints on stdout when it starts,
	// served by GetContainerLogs.
	Logs []string
	// ReadyAfter makes commands not programmed with SetExecResult (exec
	// probes) exit 1, and the container's ports closed to DialPod (network
	// probes), until the container has run this long, so a readiness probe
	// passes only then. Zero: at once.
	ReadyAfter time.Duration
	// Usage is the container's resource use from its start (ListPodStats,
	// NodeStats); SetUsage changes it while it runs.
	Usage Usage
}

// Call is one recorded call.
type Call struct {
	Method string
	// PodUID is the pod the call was about, if any.
	PodUID types.UID
	Time   time.Time
}

// Kill records one container stop by KillPod or SyncPod.
type Kill struct {
	PodUID types.UID
	Name   string
	ID     runtime.ContainerID
	// GracePeriod is the grace period the container got, in seconds.
	GracePeriod int64
	// Forced: the container ignored TERM and was killed when its grace
	// period ended.
	Forced bool
	Time   time.Time
}

// method names a call for counters, latencies and fault injection.
type method int

const (
	mVersion method = iota
	mStatus
	mGetPods
	mGetPodStatus
	mSyncPod
	mKillPod
	mGarbageCollect
	mPullImage
	mListImages
	mRemoveImage
	mWatchContainerEvents
	mExecSync
	mExec
	mAttach
	mPortForward
	// Steps inside SyncPod and KillPod, so faults can hit one step.
	mCreatePodSandbox
	mStartContainer
	mStopContainer
	numMethods
)

func (m method) String() string {
	switch m {
	case mVersion:
		return "Version"
	case mStatus:
		return "Status"
	case mGetPods:
		return "GetPods"
	case mGetPodStatus:
		return "GetPodStatus"
	case mSyncPod:
		return "SyncPod"
	case mKillPod:
		return "KillPod"
	case mGarbageCollect:
		return "GarbageCollect"
	case mPullImage:
		return "PullImage"
	case mListImages:
		return "ListImages"
	case mRemoveImage:
		return "RemoveImage"
	case mWatchContainerEvents:
		return "WatchContainerEvents"
	case mExecSync:
		return "ExecSync"
	case mExec:
		return "Exec"
	case mAttach:
		return "Attach"
	case mPortForward:
		return "PortForward"
	case mCreatePodSandbox:
		return "CreatePodSandbox"
	case mStartContainer:
		return "StartContainer"
	case mStopContainer:
		return "StopContainer"
	}
	return fmt.Sprintf("method(%d)", int(m))
}

func parseMethod(name string) (method, error) {
	for m := method(0); m < numMethods; m++ {
		if m.String() == name {
			return m, nil
		}
	}
	return 0, fmt.Errorf("fake: unknown method %q: %w", name, runtime.ErrInvalidConfig)
}

// Runtime is the in-memory runtime. Create it with New; it is safe for
// concurrent use.
type Runtime struct {
	clock       clock.Clock
	log         logr.Logger
	typ         string
	version     string
	maxCalls    int
	eventBuffer int
	pullBackoff *runtime.Backoff

	mu         sync.Mutex
	rng        *rand.Rand
	failure    [numMethods]float64
	latency    [numMethods]time.Duration
	counts     [numMethods]int
	calls      []Call // ring of at most maxCalls
	callsStart int
	kills      []Kill
	byImage    map[string]Behavior
	byName     map[string]Behavior
	images     map[string]string // reference -> image ID
	pulledAt   map[string]time.Time
	pinned     map[string]bool // reference -> pinned
	imageFsCap uint64
	pods       map[types.UID]*podState
	order      []*podState // creation order, for GetPods
	seq        uint64
	status     runtime.RuntimeStatus
	watchers   []*watcher
	execs      map[execKey]ExecResult
	podBehav   func(*v1.Pod, *v1.Container) (Behavior, bool)
	// podNet and ipSeq hand out sandbox IPs when Config.PodCIDR is set.
	podNet   netip.Prefix
	ipSeq    uint64
	rec      runtime.EventRecorder
	hooks    *lifecycle.Runner
	hookRuns []HookRun
	// changed, if set, is closed at the next log line or container change
	// (Attach waits on it).
	changed chan struct{}
	// execPods finds the pod of a container ExecSync was asked about.
	execPods map[runtime.ContainerID]*podState
	// started, nodeCap and overhead are the node NodeStats reports.
	started  time.Time
	nodeCap  NodeCapacity
	overhead usageState
}

var (
	_ runtime.Runtime          = (*Runtime)(nil)
	_ runtime.GarbageCollector = (*Runtime)(nil)
	_ runtime.ImageService     = (*Runtime)(nil)
	_ runtime.EventSource      = (*Runtime)(nil)
)

// New returns an empty runtime whose RuntimeReady and NetworkReady
// conditions are true. It rejects failure rates outside [0, 1] or for
// unknown methods, and a negative back-off, with an error wrapping
// runtime.ErrInvalidConfig.
func New(c Config) (*Runtime, error) {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	if c.RuntimeType == "" {
		c.RuntimeType = "fake"
	}
	if c.Version == "" {
		c.Version = "0.1.0"
	}
	if c.ImagePullBackoffInitial < 0 || c.ImagePullBackoffMax < 0 {
		return nil, fmt.Errorf("fake: negative image pull back-off: %w", runtime.ErrInvalidConfig)
	}
	if c.ImagePullBackoffInitial == 0 {
		c.ImagePullBackoffInitial = 10 * time.Second
	}
	if c.ImagePullBackoffMax == 0 {
		c.ImagePullBackoffMax = 300 * time.Second
	}
	switch {
	case c.MaxRecordedCalls == 0:
		c.MaxRecordedCalls = 10000
	case c.MaxRecordedCalls < 0:
		c.MaxRecordedCalls = 0
	}
	var podNet netip.Prefix
	if c.PodCIDR != "" {
		var err error
		podNet, err = netip.ParsePrefix(c.PodCIDR)
		if err != nil || !podNet.Addr().Is4() || podNet.Bits() > 30 {
			return nil, fmt.Errorf("fake: pod CIDR %q: an IPv4 network of 4 addresses or more is required: %w", c.PodCIDR, runtime.ErrInvalidConfig)
		}
		podNet = podNet.Masked()
	}
	if c.EventBuffer <= 0 {
		c.EventBuffer = 1000
	}
	r := &Runtime{
		clock:       c.Clock,
		log:         c.Log,
		typ:         c.RuntimeType,
		version:     c.Version,
		maxCalls:    c.MaxRecordedCalls,
		eventBuffer: c.EventBuffer,
		pullBackoff: runtime.NewBackoff(c.ImagePullBackoffInitial, c.ImagePullBackoffMax, 0, c.Clock),
		rng:         rand.New(rand.NewPCG(c.Seed, c.Seed^0x9e3779b97f4a7c15)),
		byImage:     map[string]Behavior{},
		byName:      map[string]Behavior{},
		images:      map[string]string{},
		pulledAt:    map[string]time.Time{},
		pods:        map[types.UID]*podState{},
		podBehav:    c.PodBehavior,
		podNet:      podNet,
		rec:         c.Recorder,
		started:     c.Clock.Now(),
		nodeCap:     NodeCapacity{}.withDefaults(),
		overhead:    usageState{since: c.Clock.Now()},
		status: runtime.RuntimeStatus{Conditions: []runtime.RuntimeCondition{
			{Type: runtime.RuntimeReady, Status: true},
			{Type: runtime.NetworkReady, Status: true},
		}},
	}
	r.hooks = lifecycle.New(lifecycle.Config{Exec: r, Dial: r.DialPod, PodIP: r.podIP, Clock: c.Clock, Recorder: c.Recorder, Log: c.Log.WithName("hooks")})
	for name, p := range c.FailureRates {
		if err := r.SetFailureRate(name, p); err != nil {
			return nil, err
		}
	}
	for _, img := range c.Images {
		r.images[img] = imageID(img)
	}
	return r, nil
}

// SetFailureRate makes calls of the named method fail with probability p,
// with an error wrapping ErrInjected. Methods: Version, Status, GetPods,
// GetPodStatus, SyncPod, KillPod, GarbageCollect, PullImage, ListImages,
// RemoveImage, WatchContainerEvents, ExecSync, and the steps CreatePodSandbox, StartContainer (also image
// pulls inside SyncPod count as PullImage) and StopContainer, whose injected
// failures show as failed steps of SyncPod and KillPod.
func (r *Runtime) SetFailureRate(name string, p float64) error {
	m, err := parseMethod(name)
	if err != nil {
		return err
	}
	if p < 0 || p > 1 || p != p {
		return fmt.Errorf("fake: failure rate %v for %s not in [0, 1]: %w", p, name, runtime.ErrInvalidConfig)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failure[m] = p
	return nil
}

// SetLatency makes every call of the named method (see SetFailureRate) take
// d on the clock before it does anything. A call whose ctx ends first
// returns ctx's error.
func (r *Runtime) SetLatency(name string, d time.Duration) error {
	m, err := parseMethod(name)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latency[m] = d
	return nil
}

// SetImageBehavior programs containers running image.
func (r *Runtime) SetImageBehavior(image string, b Behavior) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byImage[image] = b
}

// SetContainerBehavior programs containers of the given name, in any pod.
func (r *Runtime) SetContainerBehavior(name string, b Behavior) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byName[name] = b
}

// behavior returns the programmed behaviour of a container of pod (nil
// for an image pulled on its own); r.mu must be held.
func (r *Runtime) behavior(pod *v1.Pod, name, image string) Behavior {
	if r.podBehav != nil && pod != nil {
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				if cs[i].Name == name {
					if b, ok := r.podBehav(pod, &cs[i]); ok {
						return b
					}
				}
			}
		}
	}
	if b, ok := r.byName[name]; ok {
		return b
	}
	return r.byImage[image]
}

// SetCondition sets one condition Status reports.
func (r *Runtime) SetCondition(c runtime.RuntimeCondition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.status.Conditions {
		if r.status.Conditions[i].Type == c.Type {
			r.status.Conditions[i] = c
			return
		}
	}
	r.status.Conditions = append(r.status.Conditions, c)
}

// Calls returns the recorded calls, oldest first.
func (r *Runtime) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Call, 0, len(r.calls))
	out = append(out, r.calls[r.callsStart:]...)
	return append(out, r.calls[:r.callsStart]...)
}

// CallCount returns how often the named method was called (0 for a name
// that is not a method).
func (r *Runtime) CallCount(name string) int {
	m, err := parseMethod(name)
	if err != nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[m]
}

// ResetCalls forgets recorded calls, counters and kills.
func (r *Runtime) ResetCalls() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls, r.callsStart, r.counts, r.kills = nil, 0, [numMethods]int{}, nil
}

// Kills returns every container stop so far, in order.
func (r *Runtime) Kills() []Kill {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Kill(nil), r.kills...)
}

// enter records a call of m, then applies its latency and its injected
// fault. It must be called without r.mu held.
func (r *Runtime) enter(ctx context.Context, m method, uid types.UID) error {
	r.mu.Lock()
	r.record(m, uid)
	d := r.latency[m]
	if d <= 0 {
		defer r.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
		return r.fault(m)
	}
	r.mu.Unlock()
	if err := r.wait(ctx, d); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fault(m)
}

// record counts a call; r.mu must be held.
func (r *Runtime) record(m method, uid types.UID) {
	r.counts[m]++
	if r.maxCalls == 0 {
		return
	}
	c := Call{Method: m.String(), PodUID: uid, Time: r.clock.Now()}
	if len(r.calls) < r.maxCalls {
		r.calls = append(r.calls, c)
		return
	}
	r.calls[r.callsStart] = c
	r.callsStart = (r.callsStart + 1) % len(r.calls)
}

// fault draws whether m fails now; r.mu must be held. Methods without a
// failure rate draw nothing, so adding a rate to one method does not shift
// the others' sequences.
func (r *Runtime) fault(m method) error {
	if p := r.failure[m]; p > 0 && r.rng.Float64() < p {
		return fmt.Errorf("fake: %s: %w", m, ErrInjected)
	}
	return nil
}

// wait waits d on the clock, or until ctx ends. It must be called without
// r.mu held.
func (r *Runtime) wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Type returns Config.RuntimeType.
func (r *Runtime) Type() string { return r.typ }

// Version returns Config.Version.
func (r *Runtime) Version(ctx context.Context) (string, error) {
	if err := r.enter(ctx, mVersion, ""); err != nil {
		return "", err
	}
	return r.version, nil
}

// Status returns the conditions, as set by SetCondition.
func (r *Runtime) Status(ctx context.Context) (*runtime.RuntimeStatus, error) {
	if err := r.enter(ctx, mStatus, ""); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &runtime.RuntimeStatus{Conditions: append([]runtime.RuntimeCondition(nil), r.status.Conditions...)}, nil
}
