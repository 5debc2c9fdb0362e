package sim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/sim"
)

func TestUsageAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ann       map[string]string
		container string
		want      fake.Usage
		bad       bool
	}{
		{"cpu for every container", map[string]string{sim.CPUAnnotation: "1500m"}, "app", fake.Usage{CPUMilli: 1500}, false},
		{"memory for one container, growing", map[string]string{sim.MemoryAnnotation: "db=100Mi+10Mi/s"}, "db", fake.Usage{MemoryBytes: 100 << 20, MemoryGrowth: 10 << 20}, false},
		{"another container's item does not apply", map[string]string{sim.MemoryAnnotation: "db=100Mi"}, "app", fake.Usage{}, false},
		{"disk", map[string]string{sim.DiskAnnotation: "1Gi"}, "app", fake.Usage{DiskBytes: 1 << 30}, false},
		{"bad quantity", map[string]string{sim.CPUAnnotation: "lots"}, "app", fake.Usage{}, true},
		{"growth without /s", map[string]string{sim.MemoryAnnotation: "1Mi+1Mi"}, "app", fake.Usage{}, true},
		{"negative memory", map[string]string{sim.MemoryAnnotation: "-1Mi"}, "app", fake.Usage{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{}
			pod.Annotations = tc.ann
			b, ok := sim.AnnotationBehavior(pod, &v1.Container{Name: tc.container})
			if tc.bad {
				assert.True(t, ok)
				assert.ErrorIs(t, b.StartError, runtime.ErrCreateContainerConfig)
				return
			}
			assert.NoError(t, b.StartError)
			assert.Equal(t, tc.want, b.Usage)
			assert.Equal(t, tc.want != fake.Usage{}, ok)
		})
	}
}
