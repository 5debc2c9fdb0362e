package syncloop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podconfig"
)

// Errors of RunOnce.
var (
	// ErrNoManifest: no pod update arrived within RunOnceConfig.ManifestWait.
	ErrNoManifest = errors.New("syncloop: no pod manifest update")
	// ErrPodNotRunning: a pod was still not running after MaxRetries syncs.
	ErrPodNotRunning = errors.New("syncloop: pod containers not running")
)

// RunPodFunc brings pod one step towards running, as one SyncPod does, and
// reports done once all its containers run or the pod has completed. An
// error ends the pod's attempt.
type RunPodFunc func(ctx context.Context, pod *v1.Pod) (done bool, err error)

// PodResult is the outcome of one pod in RunOnce: Err is nil if it ran.
type PodResult struct {
	Pod *v1.Pod
	Err error
}

// RunOnceConfig configures RunOnce.
type RunOnceConfig struct {
	// ManifestWait is how long to wait for the pods. Default 1s.
	ManifestWait time.Duration
	// RetryDelay is the wait before the first retry of a pod not yet
	// running; it doubles with every retry. Default 1s.
	RetryDelay time.Duration
	// MaxRetries is how often a pod is synced again before it fails with
	// ErrPodNotRunning. Default 10.
	MaxRetries int
	// Clock drives the waits. Default: the real clock.
	Clock clock.Clock
	// Log receives progress. Default: logr.Discard().
	Log logr.Logger
}

// RunOnce is the agent's run-once mode (the kubelet's --runonce): it takes
// the pods of the first update on updates (the static sources), runs them
// all at once with run until each is running or done, retrying with a
// doubling delay, and returns one result per pod in the order of the update.
// It does not stop the pods. It fails with ErrNoManifest if no update arrives
// within ManifestWait, or ctx's error if ctx ends first.
func RunOnce(ctx context.Context, updates <-chan podconfig.PodUpdate, run RunPodFunc, c RunOnceConfig) ([]PodResult, error) {
	if run == nil || updates == nil {
		return nil, fmt.Errorf("RunOnce needs updates and run: %w", ErrInvalidConfig)
	}
	if c.ManifestWait <= 0 {
		c.ManifestWait = time.Second
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = time.Second
	}
	if c.MaxRetries <= 0 {
		c.MaxRetries = 10
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}

	pods, err := waitManifest(ctx, updates, c)
	if err != nil {
		return nil, err
	}
	c.Log.Info("Running pods once", "count", len(pods))

	type indexed struct {
		i   int
		err error
	}
	ch := make(chan indexed)
	for i, pod := range pods {
		go func() { ch <- indexed{i, runPodOnce(ctx, pod, run, c)} }()
	}
	results := make([]PodResult, len(pods))
	for range pods {
		r := <-ch
		results[r.i] = PodResult{Pod: pods[r.i], Err: r.err}
		if r.err != nil {
			c.Log.Error(r.err, "Pod did not run", "pod", pods[r.i].Namespace+"/"+pods[r.i].Name)
		}
	}
	return results, nil
}

// waitManifest returns the pods of the first update, preferring one already
// there over a timer that has fired.
func waitManifest(ctx context.Context, updates <-chan podconfig.PodUpdate, c RunOnceConfig) ([]*v1.Pod, error) {
	var u podconfig.PodUpdate
	var ok bool
	select {
	case u, ok = <-updates:
	default:
		select {
		case u, ok = <-updates:
		case <-c.Clock.After(c.ManifestWait):
			return nil, fmt.Errorf("none after %v: %w", c.ManifestWait, ErrNoManifest)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if !ok {
		return nil, fmt.Errorf("update channel closed: %w", ErrNoManifest)
	}
	return u.Pods, nil
}

// runPodOnce syncs pod until it is running or done, or the retries are
// exhausted; a panic in run is an error.
func runPodOnce(ctx context.Context, pod *v1.Pod, run RunPodFunc, c RunOnceConfig) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("run of pod %s/%s panicked: %v", pod.Namespace, pod.Name, r)
		}
	}()
	delay := c.RetryDelay
	for retry := 0; ; retry++ {
		done, err := run(ctx, pod)
		if err != nil {
			return fmt.Errorf("syncing pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if done {
			return nil
		}
		if retry >= c.MaxRetries {
			return fmt.Errorf("pod %s/%s after %d retries: %w", pod.Namespace, pod.Name, retry, ErrPodNotRunning)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.Clock.After(delay):
		}
		delay *= 2
	}
}
