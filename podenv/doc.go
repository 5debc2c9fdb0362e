// Package podenv builds a container's environment as the kubelet's
// makeEnvironmentVariables does: envFrom (configMaps and secrets, with
// prefix; keys no environment can hold skipped with an
// InvalidEnvironmentVariableNames event), env values with $(VAR) expansion,
// fieldRef (metadata, labels and annotations, spec.nodeName,
// spec.serviceAccountName, status.hostIP(s), status.podIP(s)),
// resourceFieldRef (limits and requests with divisor; missing limits are the
// pod's, then the node's allocatable), configMapKeyRef and secretKeyRef
// (optional honoured), and the service variables (the "kubernetes" service
// always, the namespace's services with enableServiceLinks).
//
// Where it sits: runtime/cri calls a Resolver for each container it
// creates; a provider that is not CRI-based calls it the same way. Objects
// come through ObjectGetter and ServiceLister, which objects.Cache
// satisfies. The Expand, FieldValue, MetadataValue and ResourceValue
// helpers are shared with the volume package's downward API.
//
// Errors carry the kubelet's messages (`configmaps "x" not found`,
// `couldn't find key k in ConfigMap ns/x`), which runtime/cri reports as a
// CreateContainerConfigError; the pod starts at a later sync once the
// object exists.
package podenv
