package eviction

// MemcgNotifier is a NotifierFactory on cgroup v1's memory threshold
// notifications, the kubelet's CgroupNotifierFactory: an eventfd
// registered in cgroup.event_control against memory.usage_in_bytes of the
// root memory cgroup (Root), or for allocatable thresholds of the pods
// cgroup (Root plus PodCgroup). On cgroup v2, which has no usage
// thresholds, and off Linux, Notify fails and the manager relies on its
// monitoring interval alone, as the kubelet does.
type MemcgNotifier struct {
	// Root is the cgroup v1 memory hierarchy. Default
	// "/sys/fs/cgroup/memory".
	Root string
	// PodCgroup is the pods cgroup under Root (package cm's). Default
	// "/kubepods".
	PodCgroup string
}

func (n MemcgNotifier) path(allocatable bool) string {
	root, pods := n.Root, n.PodCgroup
	if root == "" {
		root = "/sys/fs/cgroup/memory"
	}
	if pods == "" {
		pods = "/kubepods"
	}
	if allocatable {
		return root + pods
	}
	return root
}

var _ NotifierFactory = MemcgNotifier{}
