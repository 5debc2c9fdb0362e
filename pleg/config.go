package pleg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// RuntimeLister is what the PLEG needs of a runtime: list the pods and
// inspect one. runtime.Runtime satisfies it. Both methods must return when
// ctx ends; the per-pod inspection timeout relies on it.
type RuntimeLister interface {
	GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error)
	GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error)
}

var _ RuntimeLister = runtime.Runtime(nil)

// Defaults of Config.
const (
	DefaultRelistPeriod         = time.Second
	DefaultRelistThreshold      = 3 * time.Minute
	DefaultEventChannelCapacity = 1000
	DefaultInspectParallelism   = 8
	DefaultInspectTimeout       = time.Minute
	DefaultMinRelistInterval    = 100 * time.Millisecond
)

var (
	// ErrInspectionTimeout wraps the error of a GetPodStatus call that
	// Config.InspectTimeout cut short.
	ErrInspectionTimeout = errors.New("pleg: pod inspection timed out")
	// ErrAlreadyStarted is returned by Start while another Start runs.
	ErrAlreadyStarted = errors.New("pleg: already started")
)

// Config configures a GenericPLEG. Runtime and Cache are required; every other
// field has a default.
type Config struct {
	// Runtime is listed and inspected. Required.
	Runtime RuntimeLister
	// Cache receives the status of every inspected pod; pod workers read it.
	// Required.
	Cache runtime.Cache
	// RelistPeriod is the pause between the end of one relist and the start
	// of the next. Default 1s. Changeable with SetRelistDuration.
	RelistPeriod time.Duration
	// RelistThreshold is how old the last successful relist may be before
	// Healthy reports false. Default 3m. Changeable with SetRelistDuration.
	RelistThreshold time.Duration
	// EventChannelCapacity bounds the channel Watch returns. Sends never
	// block: events that do not fit are dropped and counted. Default 1000,
	// as the kubelet's.
	EventChannelCapacity int
	// InspectParallelism is how many pods are inspected (GetPodStatus) at
	// once in one relist. Default 8; 1 inspects one after another, as the
	// kubelet does. Above 1, a relist starts serially and goes parallel only
	// when inspections prove slow (a runtime call, not memory: under 20 µs
	// each after 1 ms stays serial), or when one has not returned after
	// 1 ms; so fast in-memory runtimes never pay for goroutines.
	InspectParallelism int
	// MinRelistInterval is the least pause between the end of one relist
	// and the start of one RequestRelist asked for, so that requests made
	// while many containers start coalesce into a few relists. Default
	// 100ms.
	MinRelistInterval time.Duration
	// InspectTimeout bounds one GetPodStatus call. A pod that times out gets
	// no events and is inspected again next relist. Default 1m, so that two
	// rounds of hung inspections still fit in the default health threshold.
	InspectTimeout time.Duration
	// Clock gives the time and the timers. Default clock.RealClock{}.
	Clock clock.WithDelayedExecution
	// Log receives errors (V(0)) and per-pod detail (V(2) and up). Default
	// logr.Discard().
	Log logr.Logger
	// OnRelist, if set, is called at the end of every relist, failed ones
	// included, with what it did; use it to feed metrics. It runs on the
	// relisting goroutine and should return quickly.
	OnRelist func(RelistStats)
	// Registerer, if set, receives the kubelet's PLEG metrics:
	// kubelet_pleg_relist_duration_seconds, _relist_interval_seconds,
	// _last_seen_seconds, _discard_events, and kubelet_running_pods and
	// kubelet_running_containers{container_state} as of the last relist.
	// nil: no metrics. New fails if they are registered already.
	Registerer prometheus.Registerer
}

// RelistStats describes one relist, for metrics.
type RelistStats struct {
	// Timestamp is when the relist began; inspected statuses are written to
	// the cache with it.
	Timestamp time.Time
	// Duration is how long the relist took.
	Duration time.Duration
	// Err is the error of GetPods or the context's; nil if the relist ran.
	Err error
	// Pods is how many pods GetPods returned; RunningPods how many of them
	// have a running (ready) sandbox.
	Pods, RunningPods int
	// Containers counts the listed containers by state.
	Containers ContainerCounts
	// Inspected is how many pods were inspected, InspectErrors how many of
	// those inspections failed (timeouts included).
	Inspected, InspectErrors int
	// Events counts the events sent, by type.
	Events EventCounts
	// Dropped is how many events did not fit in the channel.
	Dropped int
}

// ContainerCounts counts containers by state.
type ContainerCounts struct {
	Created, Running, Exited, Unknown int
}

// EventCounts counts events by type.
type EventCounts struct {
	Started, Died, Removed int
}

func (c ContainerCounts) total() int { return c.Created + c.Running + c.Exited + c.Unknown }

// withDefaults fills the defaults of c and validates it.
func (c Config) withDefaults() (Config, error) {
	if c.Runtime == nil {
		return c, fmt.Errorf("pleg: Runtime is required: %w", runtime.ErrInvalidConfig)
	}
	if c.Cache == nil {
		return c, fmt.Errorf("pleg: Cache is required: %w", runtime.ErrInvalidConfig)
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"RelistPeriod", &c.RelistPeriod, DefaultRelistPeriod},
		{"RelistThreshold", &c.RelistThreshold, DefaultRelistThreshold},
		{"InspectTimeout", &c.InspectTimeout, DefaultInspectTimeout},
		{"MinRelistInterval", &c.MinRelistInterval, DefaultMinRelistInterval},
	} {
		if *f.v < 0 {
			return c, fmt.Errorf("pleg: %s %v is negative: %w", f.name, *f.v, runtime.ErrInvalidConfig)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"EventChannelCapacity", &c.EventChannelCapacity, DefaultEventChannelCapacity},
		{"InspectParallelism", &c.InspectParallelism, DefaultInspectParallelism},
	} {
		if *f.v < 0 {
			return c, fmt.Errorf("pleg: %s %d is negative: %w", f.name, *f.v, runtime.ErrInvalidConfig)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return c, nil
}
