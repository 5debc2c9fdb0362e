package eviction

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// observation is a signal's value in one summary.
type observation struct {
	available, capacity int64
	// time is when the stats were taken; zero if unknown.
	time time.Time
}

// observations are a summary's signals.
type observations map[Signal]observation

// podStatsIndex finds a pod's stats in a summary by UID.
type podStatsIndex map[types.UID]*statsapi.PodStats

func (x podStatsIndex) get(pod *v1.Pod) (*statsapi.PodStats, bool) {
	s, ok := x[pod.UID]
	return s, ok
}

// observe computes the signals of a summary as the kubelet's
// makeSignalObservations: memory.available is the node's available memory
// (capacity minus working set) against available plus working set;
// allocatableMemory.available the same of the "pods" system container;
// the file system signals from nodefs, imagefs and containerfs; and
// pid.available the maximum PID minus the running processes. A signal
// whose stats are missing is absent; its thresholds are then not met.
func observe(s *statsapi.Summary, withPods bool) (observations, podStatsIndex) {
	obs := make(observations, 9)
	n := &s.Node
	if m := n.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		obs[SignalMemoryAvailable] = observation{int64(*m.AvailableBytes), int64(*m.AvailableBytes + *m.WorkingSetBytes), m.Time.Time}
	}
	for i := range n.SystemContainers {
		c := &n.SystemContainers[i]
		if c.Name != statsapi.SystemContainerPods {
			continue
		}
		if m := c.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
			obs[SignalAllocatableMemoryAvailable] = observation{int64(*m.AvailableBytes), int64(*m.AvailableBytes + *m.WorkingSetBytes), m.Time.Time}
		}
		break
	}
	fs := func(f *statsapi.FsStats, bytes, inodes Signal) {
		if f == nil {
			return
		}
		if f.AvailableBytes != nil && f.CapacityBytes != nil {
			obs[bytes] = observation{int64(*f.AvailableBytes), int64(*f.CapacityBytes), f.Time.Time}
		}
		if f.InodesFree != nil && f.Inodes != nil {
			obs[inodes] = observation{int64(*f.InodesFree), int64(*f.Inodes), f.Time.Time}
		}
	}
	fs(n.Fs, SignalNodeFsAvailable, SignalNodeFsInodesFree)
	if r := n.Runtime; r != nil {
		fs(r.ImageFs, SignalImageFsAvailable, SignalImageFsInodesFree)
		fs(r.ContainerFs, SignalContainerFsAvailable, SignalContainerFsInodesFree)
	}
	if r := n.Rlimit; r != nil && r.NumOfRunningProcesses != nil && r.MaxPID != nil {
		obs[SignalPIDAvailable] = observation{*r.MaxPID - *r.NumOfRunningProcesses, *r.MaxPID, r.Time.Time}
	}
	if !withPods {
		return obs, nil
	}
	idx := make(podStatsIndex, len(s.Pods))
	for i := range s.Pods {
		idx[types.UID(s.Pods[i].PodRef.UID)] = &s.Pods[i]
	}
	return obs, idx
}

// thresholdsMet returns the thresholds of ts that obs meets, ignoring
// grace periods; with enforceMinReclaim a threshold stays met until the
// signal is its minimum reclaim above it.
func thresholdsMet(ts []Threshold, obs observations, enforceMinReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		q := t.Value.quantity(o.capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			q += t.MinReclaim.quantity(o.capacity)
		}
		if q > o.available {
			out = append(out, t)
		}
	}
	return out
}

// mergeThresholds adds the thresholds of b not in a.
func mergeThresholds(a, b []Threshold) []Threshold {
	for _, t := range b {
		if !hasThreshold(a, t) {
			a = append(a, t)
		}
	}
	return a
}

func hasThreshold(ts []Threshold, t Threshold) bool {
	for _, o := range ts {
		if o.equal(t) {
			return true
		}
	}
	return false
}

// firstObserved is when each threshold in force was first met.
type firstObserved []struct {
	t  Threshold
	at time.Time
}

// thresholdsFirstObservedAt keeps the first time of the thresholds still
// met and stamps the new ones with now.
func thresholdsFirstObservedAt(ts []Threshold, last firstObserved, now time.Time) firstObserved {
	out := make(firstObserved, 0, len(ts))
	for _, t := range ts {
		at := now
		for _, l := range last {
			if l.t.equal(t) {
				at = l.at
				break
			}
		}
		out = append(out, struct {
			t  Threshold
			at time.Time
		}{t, at})
	}
	return out
}

// thresholdsMetGracePeriod returns the thresholds met for their grace
// period.
func thresholdsMetGracePeriod(fo firstObserved, now time.Time) []Threshold {
	var out []Threshold
	for _, f := range fo {
		if now.Sub(f.at) >= f.t.GracePeriod {
			out = append(out, f.t)
		}
	}
	return out
}

// thresholdsUpdatedStats keeps the thresholds whose signal was observed
// anew since last (or whose stats carry no time), so that one observation
// does not evict twice.
func thresholdsUpdatedStats(ts []Threshold, obs, last observations) []Threshold {
	var out []Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		l, ok := last[t.Signal]
		if !ok || o.time.IsZero() || o.time.After(l.time) {
			out = append(out, t)
		}
	}
	return out
}

// conditionSet is a set of the three pressure conditions.
type conditionSet uint8

const (
	memoryPressure conditionSet = 1 << iota
	diskPressure
	pidPressure
)

var conditionBits = [...]struct {
	bit  conditionSet
	cond v1.NodeConditionType
}{{memoryPressure, v1.NodeMemoryPressure}, {diskPressure, v1.NodeDiskPressure}, {pidPressure, v1.NodePIDPressure}}

func bitOf(c v1.NodeConditionType) conditionSet {
	for _, b := range conditionBits {
		if b.cond == c {
			return b.bit
		}
	}
	return 0
}

// nodeConditions are the conditions the thresholds raise.
func nodeConditions(ts []Threshold) conditionSet {
	var s conditionSet
	for _, t := range ts {
		if info, ok := signalOf(t.Signal); ok {
			s |= bitOf(info.condition)
		}
	}
	return s
}

// list is the set's conditions, memory, disk, PID (the kubelet's order
// is a map's).
func (s conditionSet) list() []v1.NodeConditionType {
	var out []v1.NodeConditionType
	for _, b := range conditionBits {
		if s&b.bit != 0 {
			out = append(out, b.cond)
		}
	}
	return out
}

// conditionsLastObserved is when each condition was last raised.
type conditionsLastObserved [len(conditionBits)]time.Time

// update stamps the conditions of s with now.
func (c *conditionsLastObserved) update(s conditionSet, now time.Time) {
	for i, b := range conditionBits {
		if s&b.bit != 0 {
			c[i] = now
		}
	}
}

// since returns the conditions raised within period before now: a
// condition stays for the pressure transition period after its last
// threshold went.
func (c *conditionsLastObserved) since(period time.Duration, now time.Time) conditionSet {
	var s conditionSet
	for i, b := range conditionBits {
		if !c[i].IsZero() && now.Sub(c[i]) < period {
			s |= b.bit
		}
	}
	return s
}
