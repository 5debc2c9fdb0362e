// Package nodeflags holds the kubelet-style flags and the set-up they drive
// that the example node agents (examples/standalone, examples/kubenode)
// share: the CRI runtime and its opening, cluster DNS, QoS cgroups,
// manifest URL headers, the node name, the kubelet's API ports with its
// authentication and authorization flags and the self-signed serving
// certificate (Server, Serve: every port bound before the agent runs), and
// the exit status. Errors in the
// command line wrap ErrUsage.
//
//	var dns nodeflags.DNS
//	dns.AddFlags(fs)
//	...
//	configurer, err := dns.Configurer(nodeName, nodeflags.EventLog{Log: log}, log)
package nodeflags

import "errors"

// ErrUsage is wrapped by errors in the command line.
var ErrUsage = errors.New("usage")
