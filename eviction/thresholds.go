package eviction

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal is what a threshold measures, the kubelet's eviction signal.
type Signal string

// The kubelet's eviction signals. Each is an amount still available; a
// threshold is met when the signal falls below it.
const (
	// SignalMemoryAvailable is the node's memory capacity minus its
	// working set.
	SignalMemoryAvailable Signal = "memory.available"
	// SignalAllocatableMemoryAvailable is the pods cgroup's memory: pod
	// allocatable minus the pods' working set.
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	// SignalNodeFsAvailable is the bytes available on the node's file
	// system (the kubelet's root dir: volumes, logs).
	SignalNodeFsAvailable Signal = "nodefs.available"
	// SignalNodeFsInodesFree is the free inodes of the node's file system.
	SignalNodeFsInodesFree Signal = "nodefs.inodesFree"
	// SignalImageFsAvailable is the bytes available on the runtime's image
	// file system.
	SignalImageFsAvailable Signal = "imagefs.available"
	// SignalImageFsInodesFree is the free inodes of the image file system.
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	// SignalContainerFsAvailable is the bytes available on the file system
	// of the containers' writable layers: nodefs's or imagefs's thresholds
	// apply to it, as the kubelet's, whatever is configured for it.
	SignalContainerFsAvailable Signal = "containerfs.available"
	// SignalContainerFsInodesFree is the free inodes of that file system.
	SignalContainerFsInodesFree Signal = "containerfs.inodesFree"
	// SignalPIDAvailable is the node's maximum PID minus its running
	// processes.
	SignalPIDAvailable Signal = "pid.available"
)

// Resources reclaimed internally: inodes and process IDs.
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePids   v1.ResourceName = "pids"
)

// signalInfo is what the manager knows of a signal: the node condition its
// thresholds raise and the resource evictions reclaim.
type signalInfo struct {
	condition v1.NodeConditionType
	resource  v1.ResourceName
}

// signals is every known signal; never modified.
func signalOf(s Signal) (signalInfo, bool) {
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable:
		return signalInfo{v1.NodeMemoryPressure, v1.ResourceMemory}, true
	case SignalNodeFsAvailable, SignalImageFsAvailable, SignalContainerFsAvailable:
		return signalInfo{v1.NodeDiskPressure, v1.ResourceEphemeralStorage}, true
	case SignalNodeFsInodesFree, SignalImageFsInodesFree, SignalContainerFsInodesFree:
		return signalInfo{v1.NodeDiskPressure, resourceInodes}, true
	case SignalPIDAvailable:
		return signalInfo{v1.NodePIDPressure, resourcePids}, true
	}
	return signalInfo{}, false
}

// ThresholdValue is an absolute quantity or a fraction of the capacity;
// Quantity wins when both are set.
type ThresholdValue struct {
	Quantity *resource.Quantity
	// Percentage is a fraction of capacity, 0.1 for 10%.
	Percentage float32
}

// quantity is v against capacity, as the kubelet's GetThresholdQuantity.
func (v ThresholdValue) quantity(capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(capacity) * float64(v.Percentage))
}

func (v ThresholdValue) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return strconv.FormatFloat(math.Round(float64(v.Percentage)*1e6)/1e4, 'f', -1, 64) + "%"
}

// Threshold is met when its signal is below Value (the kubelet's only
// operator, LessThan).
type Threshold struct {
	Signal Signal
	Value  ThresholdValue
	// GracePeriod is how long the threshold must be met before pods are
	// evicted: 0 for a hard threshold, more for a soft one.
	GracePeriod time.Duration
	// MinReclaim, once the threshold is met, keeps it met until the
	// signal is MinReclaim above Value. Optional.
	MinReclaim *ThresholdValue
}

// Hard reports whether t is a hard threshold (no grace period).
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

func (t Threshold) String() string {
	s := string(t.Signal) + "<" + t.Value.String()
	if !t.Hard() {
		s += " for " + t.GracePeriod.String()
	}
	if t.MinReclaim != nil {
		s += " reclaim " + t.MinReclaim.String()
	}
	return s
}

// equal reports whether a and b are the same threshold, minimum reclaim
// aside, as the kubelet's hasThreshold.
func (t Threshold) equal(o Threshold) bool {
	if t.Signal != o.Signal || t.GracePeriod != o.GracePeriod {
		return false
	}
	if (t.Value.Quantity == nil) != (o.Value.Quantity == nil) {
		return false
	}
	if t.Value.Quantity != nil {
		return t.Value.Quantity.Cmp(*o.Value.Quantity) == 0
	}
	return t.Value.Percentage == o.Value.Percentage
}

// DefaultEvictionHard returns the kubelet's default hard thresholds on
// Linux, by signal, in the syntax of the -eviction-hard flag.
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		string(SignalMemoryAvailable):  "100Mi",
		string(SignalNodeFsAvailable):  "10%",
		string(SignalNodeFsInodesFree): "5%",
		string(SignalImageFsAvailable): "15%",
	}
}

// DefaultThresholds returns the kubelet's default thresholds: the hard
// ones of DefaultEvictionHard, no soft ones.
func DefaultThresholds() []Threshold {
	t, err := ParseThresholdConfig(false, DefaultEvictionHard(), nil, nil, nil)
	if err != nil {
		panic(err) // the defaults parse; a test checks it
	}
	return t
}

// ErrInvalidThreshold is wrapped by the errors of ParseThresholdConfig and
// ParseMap.
var ErrInvalidThreshold = errors.New("eviction: invalid threshold")

// ParseThresholdConfig builds thresholds from the kubelet's flags:
// hard and soft map a signal to a quantity or percentage ("100Mi",
// "10%"; "0%" and "100%" are ignored), softGracePeriod a signal of soft
// to its grace period ("1m30s", required for each), minimumReclaim a
// signal to its minimum reclaim. With enforceNodeAllocatable (the
// kubelet's --enforce-node-allocatable=pods) a hard memory.available
// threshold is copied to allocatableMemory.available. The result is in
// signal order, hard before soft.
func ParseThresholdConfig(enforceNodeAllocatable bool, hard, soft, softGracePeriod, minimumReclaim map[string]string) ([]Threshold, error) {
	hs, err := parseStatements(hard)
	if err != nil {
		return nil, err
	}
	ss, err := parseStatements(soft)
	if err != nil {
		return nil, err
	}
	graces := map[Signal]time.Duration{}
	for _, k := range slices.Sorted(maps.Keys(softGracePeriod)) {
		if _, ok := signalOf(Signal(k)); !ok {
			return nil, fmt.Errorf("unsupported eviction signal %s: %w", k, ErrInvalidThreshold)
		}
		d, err := time.ParseDuration(softGracePeriod[k])
		if err != nil {
			return nil, fmt.Errorf("grace period of %s: %v: %w", k, err, ErrInvalidThreshold)
		}
		if d < 0 {
			return nil, fmt.Errorf("grace period of %s: %v is negative: %w", k, d, ErrInvalidThreshold)
		}
		graces[Signal(k)] = d
	}
	for i := range ss {
		d, ok := graces[ss[i].Signal]
		if !ok {
			return nil, fmt.Errorf("grace period must be specified for the soft eviction threshold %s: %w", ss[i].Signal, ErrInvalidThreshold)
		}
		ss[i].GracePeriod = d
	}
	reclaims := map[Signal]ThresholdValue{}
	for _, k := range slices.Sorted(maps.Keys(minimumReclaim)) {
		if _, ok := signalOf(Signal(k)); !ok {
			return nil, fmt.Errorf("unsupported eviction signal %s: %w", k, ErrInvalidThreshold)
		}
		v, err := parseValue(minimumReclaim[k])
		if err != nil {
			return nil, fmt.Errorf("minimum reclaim of %s: %w", k, err)
		}
		switch {
		case v.Quantity == nil && v.Percentage <= 0:
			return nil, fmt.Errorf("eviction percentage minimum reclaim %s must be positive: %w", k, ErrInvalidThreshold)
		case v.Quantity != nil && v.Quantity.Sign() < 0:
			return nil, fmt.Errorf("negative eviction minimum reclaim specified for %s: %w", k, ErrInvalidThreshold)
		}
		reclaims[Signal(k)] = v
	}
	out := append(hs, ss...)
	for i := range out {
		if r, ok := reclaims[out[i].Signal]; ok {
			out[i].MinReclaim = &r
		}
	}
	if enforceNodeAllocatable {
		for _, t := range out {
			if t.Signal == SignalMemoryAvailable && t.Hard() {
				out = append(out, Threshold{Signal: SignalAllocatableMemoryAvailable, Value: t.Value, MinReclaim: t.MinReclaim})
			}
		}
	}
	return out, nil
}

// parseStatements parses signal->value statements in signal order.
func parseStatements(m map[string]string) ([]Threshold, error) {
	var out []Threshold
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s := Signal(k)
		if _, ok := signalOf(s); !ok {
			return nil, fmt.Errorf("unsupported eviction signal %s: %w", k, ErrInvalidThreshold)
		}
		val := strings.TrimSpace(m[k])
		if val == "0%" || val == "100%" {
			continue
		}
		v, err := parseValue(val)
		if err != nil {
			return nil, fmt.Errorf("eviction threshold %s: %w", k, err)
		}
		switch {
		case v.Quantity == nil && (v.Percentage < 0 || v.Percentage > 1):
			return nil, fmt.Errorf("eviction percentage threshold %s must be between 0%% and 100%%: %s: %w", k, val, ErrInvalidThreshold)
		case v.Quantity != nil && v.Quantity.Sign() <= 0:
			return nil, fmt.Errorf("eviction threshold %s must be positive: %s: %w", k, val, ErrInvalidThreshold)
		}
		out = append(out, Threshold{Signal: s, Value: v})
	}
	return out, nil
}

func parseValue(val string) (ThresholdValue, error) {
	if p, ok := strings.CutSuffix(val, "%"); ok {
		f, err := strconv.ParseFloat(p, 32)
		if err != nil {
			return ThresholdValue{}, fmt.Errorf("%q: %v: %w", val, err, ErrInvalidThreshold)
		}
		return ThresholdValue{Percentage: float32(f) / 100}, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return ThresholdValue{}, fmt.Errorf("%q: %v: %w", val, err, ErrInvalidThreshold)
	}
	return ThresholdValue{Quantity: &q}, nil
}

// ParseMap parses a kubelet eviction flag's value: statements separated by
// commas, each a signal, sep ("<" for -eviction-hard and -eviction-soft,
// "=" for -eviction-soft-grace-period and -eviction-minimum-reclaim) and a
// value, as "memory.available<100Mi,nodefs.available<10%". An empty s is an
// empty map.
func ParseMap(s, sep string) (map[string]string, error) {
	out := map[string]string{}
	for _, st := range strings.Split(s, ",") {
		st = strings.TrimSpace(st)
		if st == "" {
			continue
		}
		k, v, ok := strings.Cut(st, sep)
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("%q: want signal%svalue: %w", st, sep, ErrInvalidThreshold)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}
