// Package harness runs several nodekit agents ("nodes") in one process, each
// on its own in-memory runtime (runtime/fake), fed by an in-memory pod store
// that stands in for the apiserver: a test harness for controllers that
// create pods and wait for them to run, without a cluster.
//
// Where it sits: the Cluster plays the apiserver's part of the data path.
// Apply and Delete change the store; every change of a node's pods is sent
// to that node's agent as a SET on its source channel (agent.Config.Sources),
// and the agent runs it through podconfig, syncloop, podworkers, pleg and
// status as it would pods from an apiserver. Pods reads back the pods with
// the statuses the agents generated.
//
//	c, err := harness.New(harness.Config{})
//	if err != nil { ... }
//	defer c.Close()
//	if _, err := c.AddNode("node-a"); err != nil { ... }
//	err = c.Apply(ctx, pod) // pod.Spec.NodeName == "node-a"
//	err = c.WaitFor(ctx, func(pods []*v1.Pod) bool { ... })
//	err = c.Delete(ctx, "default", "web")
//
// Where it differs from a cluster: no scheduler (a pod goes to the node its
// spec.nodeName names, and must name one), no admission or defaulting beyond
// the agent's own, no graceful deletion (Delete removes the pod at once and
// the agent then stops it), and statuses are read from the agents rather
// than written back to the store.
package harness
