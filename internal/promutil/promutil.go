// Package promutil holds what nodekit's packages share to register the
// kubelet's Prometheus metrics on a registry their caller passes.
package promutil

import "github.com/prometheus/client_golang/prometheus"

// Subsystem prefixes every metric name, as the kubelet's: kubelet_<name>.
const Subsystem = "kubelet"

// Register registers every collector on reg, or none: after a failure the
// ones already registered are unregistered again, so a caller can retry
// with another registry.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return err
		}
	}
	return nil
}

// PodStartupBuckets are the kubelet's buckets for pod start durations, in
// seconds (a new slice each call: callers must not share a mutable one).
func PodStartupBuckets() []float64 {
	return []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
}
