package podconfigtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

// Benchmarks build many pods and mutate some: each call must give a pod of
// its own, named after i, with image in both spec and status.
func TestWorkloadPodIsFreshAndNamedAfterIndex(t *testing.T) {
	a, b := WorkloadPod(1, "web:1"), WorkloadPod(2, "web:2")
	assert.Equal(t, "pod-1", a.Name)
	assert.Equal(t, types.UID("uid-2"), b.UID)
	assert.Equal(t, "web:2", b.Spec.Containers[0].Image)
	assert.Equal(t, "web:2", b.Status.ContainerStatuses[0].Image)

	a.Labels["app"] = "changed"
	a.Spec.Containers[0].Env[0].Value = "changed"
	c := WorkloadPod(1, "web:1")
	assert.Equal(t, "web", c.Labels["app"])
	assert.Equal(t, "1", c.Spec.Containers[0].Env[0].Value)
}
