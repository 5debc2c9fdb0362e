// Package admission decides whether a node agent may run a pod, with the
// shape of the kubelet's admit handlers (pkg/kubelet/lifecycle): each
// PodAdmitHandler gets the pod and the pods active on the node and admits it
// or gives a reason and a message; the first refusal in an ordered list
// wins, and the agent fails the pod with that reason in its status.
//
// The built-in checks of the agent are handlers here: MaxPods (reason
// OutOfpods), DenyHostNamespaces, DenyPrivileged, Sysctls (the kubelet's
// sysctl allowlist: SafeSysctls of the running kernel and the unsafe
// sysctls a node allows; reason SysctlForbidden) and GeneralPredicates,
// the kubelet's predicate admit handler (resources against the Node's
// allocatable, node selector and affinity, node name, host ports,
// NoExecute taints, OS; reasons OutOfcpu, NodeAffinity, ...), which the
// agent adds when it registers a Node, as GeneralPredicatesWithPreemption:
// until the Node is registered, pods are checked against the Node it would
// register, as by the kubelet, and a critical pod (podutil.IsCritical) short
// only of resources is admitted once a Preempter stopped a set of other
// pods chosen as the kubelet's CriticalPodAdmissionHandler chooses them.
// GeneralPredicatesWithoutResources leaves the resources out, as
// virtual-kubelet never refuses a pod for its provider's capacity
// (agent.Config.IgnoreCapacity). A custom check is a
// PodAdmitHandlerFunc. agent.Config.AdmitHandlers takes the ordered list;
// see the Examples.
package admission
