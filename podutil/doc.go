// Package podutil holds the small pod conventions every nodekit package
// shares with the kubelet: the kubernetes.io/config.* annotations that mark a
// pod's source, static and mirror pods, the pod's full name, the API
// server's default image pull policy and QoS class, the order of pod IPs,
// which init containers are sidecars, and sysctl names in dotted form. It depends on k8s.io/api alone, so any
// package may import it.
package podutil
