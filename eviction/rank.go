package eviction

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/cm"
)

// fsStats is which file system usage of a pod counts for a disk signal.
type fsStats uint8

const (
	fsRoot        fsStats = 1 << iota // containers' writable layers
	fsLogs                            // containers' logs
	fsLocalVolume                     // emptyDir, configMap, gitRepo and hostPath volumes
)

// ranker orders pods for eviction, most deserving first.
type ranker func(pods []*v1.Pod, stats podStatsIndex)

// rankKey is a pod's place in a ranking, computed once per pod rather than
// per comparison (the kubelet's cmpFuncs recompute usage for each).
type rankKey struct {
	pod *v1.Pod
	// found: the summary has the pod's stats; pods without go first.
	found bool
	// exceeds: usage above the pod's request; such pods go first.
	exceeds bool
	// priority: lower goes first.
	priority int32
	// usage: more goes first (usage above request, or processes).
	usage int64
}

func priority(pod *v1.Pod) int32 {
	if p := pod.Spec.Priority; p != nil {
		return *p
	}
	return 0
}

// sortKeys sorts pods by keys; useExceeds leaves exceeds out (PIDs).
func sortKeys(pods []*v1.Pod, keys []rankKey, useExceeds bool) {
	slices.SortStableFunc(keys, func(a, b rankKey) int {
		if a.found != b.found {
			if !a.found {
				return -1
			}
			return 1
		}
		if useExceeds && a.exceeds != b.exceeds {
			if a.exceeds {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.priority, b.priority); c != 0 {
			return c
		}
		return cmp.Compare(b.usage, a.usage)
	})
	for i := range keys {
		pods[i] = keys[i].pod
	}
}

// rankMemoryPressure is the kubelet's: pods whose working set exceeds
// their memory request first, then lower priority, then more memory used
// above the request.
func rankMemoryPressure(pods []*v1.Pod, stats podStatsIndex) {
	keys := make([]rankKey, len(pods))
	for i, p := range pods {
		k := rankKey{pod: p, priority: priority(p)}
		if s, ok := stats.get(p); ok {
			k.found = true
			used := memoryUsage(s.Memory)
			req := cm.PodRequest(p, v1.ResourceMemory)
			k.exceeds, k.usage = used > req, used-req
		}
		keys[i] = k
	}
	sortKeys(pods, keys, true)
}

// rankPIDPressure is the kubelet's: lower priority first, then more
// processes.
func rankPIDPressure(pods []*v1.Pod, stats podStatsIndex) {
	keys := make([]rankKey, len(pods))
	for i, p := range pods {
		k := rankKey{pod: p, priority: priority(p)}
		if s, ok := stats.get(p); ok {
			k.found = true
			if ps := s.ProcessStats; ps != nil && ps.ProcessCount != nil {
				k.usage = int64(*ps.ProcessCount)
			}
		}
		keys[i] = k
	}
	sortKeys(pods, keys, false)
}

// rankDiskPressure is the kubelet's rankDiskPressureFunc: pods whose usage
// of what measure counts (bytes or inodes) exceeds their request first,
// then lower priority, then more used above the ephemeral-storage request
// (the kubelet subtracts that request from inodes too).
func rankDiskPressure(measure fsStats, res v1.ResourceName) ranker {
	return func(pods []*v1.Pod, stats podStatsIndex) {
		keys := make([]rankKey, len(pods))
		for i, p := range pods {
			k := rankKey{pod: p, priority: priority(p)}
			if s, ok := stats.get(p); ok {
				k.found = true
				bytes, inodes := podDiskUsage(s, p, measure)
				used := bytes
				if res == resourceInodes {
					used = inodes
				}
				var req int64
				if res == v1.ResourceEphemeralStorage {
					req = cm.PodRequest(p, res)
				}
				k.exceeds = used > req
				k.usage = used - cm.PodRequest(p, v1.ResourceEphemeralStorage)
			}
			keys[i] = k
		}
		sortKeys(pods, keys, true)
	}
}

func memoryUsage(m *statsapi.MemoryStats) int64 {
	if m == nil || m.WorkingSetBytes == nil {
		return 0
	}
	return int64(*m.WorkingSetBytes)
}

func fsUsage(f *statsapi.FsStats) (bytes, inodes int64) {
	if f == nil {
		return 0, 0
	}
	if f.UsedBytes != nil {
		bytes = int64(*f.UsedBytes)
	}
	if f.InodesUsed != nil {
		inodes = int64(*f.InodesUsed)
	}
	return bytes, inodes
}

// podDiskUsage sums the pod's usage of measure, as the kubelet's
// podDiskUsage.
func podDiskUsage(s *statsapi.PodStats, pod *v1.Pod, measure fsStats) (bytes, inodes int64) {
	add := func(f *statsapi.FsStats) {
		b, i := fsUsage(f)
		bytes, inodes = bytes+b, inodes+i
	}
	for i := range s.Containers {
		c := &s.Containers[i]
		if measure&fsRoot != 0 {
			add(c.Rootfs)
		}
		if measure&fsLogs != 0 {
			add(c.Logs)
		}
	}
	if measure&fsLocalVolume != 0 {
		for i := range pod.Spec.Volumes {
			v := &pod.Spec.Volumes[i]
			if !localVolume(v) {
				continue
			}
			for j := range s.VolumeStats {
				if s.VolumeStats[j].Name == v.Name {
					add(&s.VolumeStats[j].FsStats)
					break
				}
			}
		}
	}
	return bytes, inodes
}

// localVolume reports whether a volume is on the node's disk, as the
// kubelet's localVolumeNames: hostPath, gitRepo, configMap and emptyDir
// on disk.
func localVolume(v *v1.Volume) bool {
	return v.HostPath != nil || v.GitRepo != nil || v.ConfigMap != nil ||
		(v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault)
}

// rankers are the ranking of each signal, as the kubelet's
// buildSignalToRankFunc for the file systems found: one for all, a
// dedicated image file system (writable layers on it), or image and
// container file systems apart (writable layers on nodefs).
func rankers(dedicatedImageFs, splitContainerFs bool) map[Signal]ranker {
	r := map[Signal]ranker{
		SignalMemoryAvailable:            rankMemoryPressure,
		SignalAllocatableMemoryAvailable: rankMemoryPressure,
		SignalPIDAvailable:               rankPIDPressure,
	}
	set := func(bytes, inodes Signal, measure fsStats) {
		r[bytes] = rankDiskPressure(measure, v1.ResourceEphemeralStorage)
		r[inodes] = rankDiskPressure(measure, resourceInodes)
	}
	switch {
	case dedicatedImageFs && !splitContainerFs:
		set(SignalNodeFsAvailable, SignalNodeFsInodesFree, fsLogs|fsLocalVolume)
		set(SignalImageFsAvailable, SignalImageFsInodesFree, fsRoot)
		set(SignalContainerFsAvailable, SignalContainerFsInodesFree, fsRoot)
	case dedicatedImageFs && splitContainerFs:
		set(SignalNodeFsAvailable, SignalNodeFsInodesFree, fsLogs|fsLocalVolume|fsRoot)
		set(SignalContainerFsAvailable, SignalContainerFsInodesFree, fsLogs|fsLocalVolume|fsRoot)
		// Images are no pod's: the kubelet measures nothing then.
		set(SignalImageFsAvailable, SignalImageFsInodesFree, 0)
	default:
		all := fsRoot | fsLogs | fsLocalVolume
		set(SignalNodeFsAvailable, SignalNodeFsInodesFree, all)
		set(SignalImageFsAvailable, SignalImageFsInodesFree, all)
		set(SignalContainerFsAvailable, SignalContainerFsInodesFree, all)
	}
	return r
}

// Messages of the kubelet's evictions and refusals.
const (
	nodeLowMessageFmt       = "The node was low on resource: %v. "
	thresholdMetMessageFmt  = "Threshold quantity: %v, available: %v. "
	containerMessageFmt     = "Container %s was using %s, request is %s, has larger consumption of %v. "
	podMessageFmt           = "Pod %s was using %s, request is %s, has larger consumption of %v. "
	nodeConditionMessageFmt = "The node had condition: %v. "
)

// Annotations of an eviction event, the kubelet's.
const (
	OffendingContainersKey      = "offending_containers"
	OffendingContainersUsageKey = "offending_containers_usage"
	OffendingPodKey             = "offending_pod"
	OffendingPodUsageKey        = "offending_pod_usage"
	StarvedResourceKey          = "starved_resource"
)

// formatOf is how the kubelet prints a resource's quantities.
func formatOf(res v1.ResourceName) resource.Format {
	if res == resourceInodes || res == resourcePids {
		return resource.DecimalSI
	}
	return resource.BinarySI
}

// evictionMessage is the kubelet's message for a pod evicted to reclaim
// res, and the event's annotations: the threshold and what was
// available, then each container (regular and init) using more of res
// than it requests; a pod with pod-level requests of memory gets its own
// usage first.
func evictionMessage(res v1.ResourceName, pod *v1.Pod, stats podStatsIndex, ts []Threshold, obs observations) (string, map[string]string) {
	var b strings.Builder
	fmt.Fprintf(&b, nodeLowMessageFmt, res)
	for _, t := range ts {
		if info, _ := signalOf(t.Signal); info.resource != res {
			continue
		}
		if o, ok := obs[t.Signal]; ok {
			q := t.Value.Quantity
			if q == nil {
				q = resource.NewQuantity(t.Value.quantity(o.capacity), resource.BinarySI)
			}
			fmt.Fprintf(&b, thresholdMetMessageFmt, q, resource.NewQuantity(o.available, formatOf(res)))
			break
		}
	}
	ann := map[string]string{}
	s, ok := stats.get(pod)
	if !ok {
		return b.String(), ann
	}
	if res == v1.ResourceMemory && pod.Spec.Resources != nil && s.Memory != nil {
		if req, ok := pod.Spec.Resources.Requests[res]; ok {
			used := resource.NewQuantity(memoryUsage(s.Memory), resource.BinarySI).String()
			fmt.Fprintf(&b, podMessageFmt, pod.Name, used, req.String(), res)
			ann[OffendingPodKey], ann[OffendingPodUsageKey] = pod.Name, used
		}
	}
	var names, usages []string
	for i := range s.Containers {
		cs := &s.Containers[i]
		c := findContainer(pod, cs.Name)
		if c == nil {
			continue
		}
		req := c.Resources.Requests[res]
		var used *resource.Quantity
		switch res {
		case v1.ResourceEphemeralStorage:
			if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil {
				used = resource.NewQuantity(int64(*cs.Rootfs.UsedBytes+*cs.Logs.UsedBytes), resource.BinarySI)
			}
		case v1.ResourceMemory:
			if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
				used = resource.NewQuantity(int64(*cs.Memory.WorkingSetBytes), resource.BinarySI)
			}
		}
		if used != nil && used.Cmp(req) > 0 {
			fmt.Fprintf(&b, containerMessageFmt, c.Name, used, req.String(), res)
			names, usages = append(names, c.Name), append(usages, used.String())
		}
	}
	ann[OffendingContainersKey] = strings.Join(names, ",")
	ann[OffendingContainersUsageKey] = strings.Join(usages, ",")
	ann[StarvedResourceKey] = string(res)
	return b.String(), ann
}

// findContainer is the regular or init container named name; ephemeral
// containers have no requests and are never blamed.
func findContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
