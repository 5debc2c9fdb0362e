package node

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The eviction signals whose hard thresholds node allocatable keeps from
// pods, the kubelet's (its hardEvictionReservation).
const (
	// SignalMemoryAvailable's threshold is kept off memory.
	SignalMemoryAvailable = "memory.available"
	// SignalNodeFsAvailable's threshold is kept off ephemeral-storage.
	SignalNodeFsAvailable = "nodefs.available"
)

// HardEviction is a hard eviction threshold as node allocatable takes it
// (the kubelet's --eviction-hard): the amount of Signal below which the
// eviction manager evicts at once, kept from pods so that they cannot
// drive the node there on their own. Quantity wins over Percentage.
type HardEviction struct {
	// Signal is SignalMemoryAvailable or SignalNodeFsAvailable; a
	// threshold on another signal keeps nothing from allocatable.
	Signal string
	// Quantity is the threshold as an amount.
	Quantity *resource.Quantity
	// Percentage is the threshold as a fraction of the resource's
	// capacity, 0.1 for 10%.
	Percentage float32
}

// reservation is what the thresholds keep by resource against capacity,
// the kubelet's hardEvictionReservation: a percentage of the capacity,
// rounded down to a byte, as its GetThresholdQuantity.
func (h HardEviction) reservation(capacity v1.ResourceList) (v1.ResourceName, resource.Quantity, bool) {
	var name v1.ResourceName
	switch h.Signal {
	case SignalMemoryAvailable:
		name = v1.ResourceMemory
	case SignalNodeFsAvailable:
		name = v1.ResourceEphemeralStorage
	default:
		return "", resource.Quantity{}, false
	}
	if h.Quantity != nil {
		return name, h.Quantity.DeepCopy(), true
	}
	c := capacity[name]
	return name, *resource.NewQuantity(int64(float64(c.Value())*float64(h.Percentage)), resource.BinarySI), true
}

// allocatable is capacity minus SystemReserved, KubeReserved and the
// EvictionHard thresholds' reservation, per resource of capacity, never
// below zero: the kubelet's node allocatable (its MachineInfo setter over
// GetNodeAllocatableReservation). A threshold given twice for one signal
// counts once, the last, as the kubelet's.
func (c *Controller) allocatable(capacity v1.ResourceList) v1.ResourceList {
	var evict v1.ResourceList
	for _, h := range c.cfg.EvictionHard {
		if name, q, ok := h.reservation(capacity); ok {
			if evict == nil {
				evict = v1.ResourceList{}
			}
			evict[name] = q
		}
	}
	out := make(v1.ResourceList, len(capacity))
	for name, q := range capacity {
		a := q.DeepCopy()
		for _, r := range [...]v1.ResourceList{c.cfg.SystemReserved, c.cfg.KubeReserved, evict} {
			if rq, ok := r[name]; ok {
				a.Sub(rq)
			}
		}
		if a.Sign() < 0 {
			a = *resource.NewQuantity(0, q.Format)
		}
		out[name] = a
	}
	return out
}
