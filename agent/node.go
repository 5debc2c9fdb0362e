package agent

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/node"
)

// newNode builds the node controller of Config.Node: the agent's node
// name, runtime, MaxPods (the pods capacity), clock and log, NodeIPs (the
// Node's InternalIPs) unless addresses are given, and the PLEG's health
// among the checks that make the node NotReady; with Config.Eviction, the eviction
// manager as pressure source and its hard thresholds kept off allocatable
// (unless Config.Node sets EvictionHard).
func (a *Agent) newNode() (*node.Controller, error) {
	c := a.cfg
	nc := *c.Node
	nc.NodeName = c.NodeName
	if nc.Runtime == nil {
		nc.Runtime = c.Runtime
	}
	if nc.MaxPods == 0 {
		nc.MaxPods = c.MaxPods
	}
	if len(nc.Addresses) == 0 && len(nc.NodeIPs) == 0 {
		nc.NodeIPs = c.NodeIPs
	}
	// a.pleg is built after the controller; the check runs only in Run.
	nc.HealthChecks = append([]node.HealthCheck{{Name: "PLEG", Check: a.PLEGHealthy}}, nc.HealthChecks...)
	if a.eviction != nil {
		if nc.Pressure == nil {
			nc.Pressure = a.eviction
		}
		if nc.EvictionHard == nil {
			nc.EvictionHard = hardEvictions(a.eviction.Thresholds())
		}
	}
	if nc.Clock == nil {
		nc.Clock = c.Clock
	}
	if nc.RuntimeDownAfter == 0 {
		nc.RuntimeDownAfter = c.RuntimeDownAfter
	}
	if nc.Log.GetSink() == nil {
		nc.Log = c.Log.WithName("node")
	}
	ctl, err := node.New(nc)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return ctl, nil
}

// hardEvictions are the hard thresholds of ts as node allocatable takes
// them; node keeps the kubelet's choice of signals.
func hardEvictions(ts []eviction.Threshold) []node.HardEviction {
	out := []node.HardEviction{}
	for _, t := range ts {
		if t.Hard() {
			out = append(out, node.HardEviction{Signal: string(t.Signal), Quantity: t.Value.Quantity, Percentage: t.Value.Percentage})
		}
	}
	return out
}

// Node returns the node controller of Config.Node, or nil without one.
func (a *Agent) Node() *node.Controller { return a.node }

// nodeAdmitHandler is the admit handler of the Node's checks on ctl
// (admission.GeneralPredicatesWithPreemption): pods are checked against
// the registered Node and, before registration, against the Node ctl
// would register (its InitialNode), as the kubelet checks them against its
// initial node; a pod never waits for the apiserver. A critical pod short
// only of resources preempts other pods (preemptPods), as the kubelet's.
func (a *Agent) nodeAdmitHandler(ctl *node.Controller) admission.PodAdmitHandler {
	initial := func() *v1.Node { return ctl.InitialNode(context.Background()) }
	if a.cfg.IgnoreCapacity {
		return admission.GeneralPredicatesWithoutResources(ctl.SharedNode, initial)
	}
	return admission.GeneralPredicatesWithPreemption(ctl.SharedNode, initial, admission.PreempterFunc(a.preemptPods))
}
