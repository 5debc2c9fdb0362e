package eviction

import (
	"fmt"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// notifierRefreshInterval keeps the notifiers from being re-armed on every
// pass when passes come often, as the kubelet's.
const notifierRefreshInterval = 10 * time.Second

// NotifierFactory arms memory usage notifications, the kubelet's memcg
// notification (--kernel-memcg-notification): Notify watches the memory
// usage of the node's root memory cgroup (or, with allocatable, of the pods
// cgroup) and calls notify whenever it crosses usageBytes (on cgroup v1,
// an eventfd on memory.usage_in_bytes through cgroup.event_control). stop
// ends the watch and returns once notify will not be called again. The
// manager re-arms each memory threshold's notifier with a fresh usage every
// 10s at most, and a notification makes it run a pass at once.
type NotifierFactory interface {
	Notify(allocatable bool, usageBytes int64, notify func()) (stop func(), err error)
}

// memoryThresholdNotifier keeps one memory threshold's notification armed.
type memoryThresholdNotifier struct {
	threshold Threshold
	factory   NotifierFactory
	wake      chan struct{}
	stop      func()
}

func (n *memoryThresholdNotifier) description() string {
	s := "soft "
	if n.threshold.Hard() {
		s = "hard "
	}
	if n.threshold.Signal == SignalAllocatableMemoryAvailable {
		s += "allocatable "
	}
	return s + "memory eviction threshold"
}

// update re-arms the notification at the usage where the working set
// reaches the threshold: capacity minus threshold plus inactive file
// (usage minus working set), as the kubelet's UpdateThreshold.
func (n *memoryThresholdNotifier) update(s *statsapi.Summary) error {
	allocatable := n.threshold.Signal == SignalAllocatableMemoryAvailable
	mem := s.Node.Memory
	if allocatable {
		mem = nil
		for i := range s.Node.SystemContainers {
			if s.Node.SystemContainers[i].Name == statsapi.SystemContainerPods {
				mem = s.Node.SystemContainers[i].Memory
			}
		}
	}
	if mem == nil || mem.UsageBytes == nil || mem.WorkingSetBytes == nil || mem.AvailableBytes == nil {
		return fmt.Errorf("summary was incomplete: memory stats of the %s need usage, working set and available bytes", n.description())
	}
	inactiveFile := int64(*mem.UsageBytes) - int64(*mem.WorkingSetBytes)
	capacity := int64(*mem.AvailableBytes + *mem.WorkingSetBytes)
	usage := capacity - n.threshold.Value.quantity(capacity) + inactiveFile
	if n.stop != nil {
		n.stop()
		n.stop = nil
	}
	stop, err := n.factory.Notify(allocatable, usage, func() {
		select {
		case n.wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	n.stop = stop
	return nil
}

func (m *Manager) updateNotifiers(s *statsapi.Summary) {
	if len(m.notifiers) == 0 || m.cfg.Clock.Since(m.notifiersAt) <= notifierRefreshInterval {
		return
	}
	m.notifiersAt = m.cfg.Clock.Now()
	for _, n := range m.notifiers {
		if err := n.update(s); err != nil {
			m.log.Info("Eviction manager: failed to update notifier", "notifier", n.description(), "err", err)
		}
	}
}

func (m *Manager) stopNotifiers() {
	for _, n := range m.notifiers {
		if n.stop != nil {
			n.stop()
			n.stop = nil
		}
	}
}
