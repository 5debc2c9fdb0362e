package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/sim"
	"github.com/nodekit/nodekit/stats"
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

// A pod whose memory annotation grows pushes its node's available memory
// down on virtual time, as the stats Summary (and eviction) sees it.
func TestMemoryAnnotationPushesTheNodeIntoPressure(t *testing.T) {
	ctx := context.Background()
	cl, err := sim.New(sim.Config{Seed: 1})
	require.NoError(t, err)
	defer cl.Close()
	n, err := cl.AddNode("node-a")
	require.NoError(t, err)
	n.Runtime().SetNodeCapacity(fake.NodeCapacity{MemoryBytes: 1 << 30})
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: "default",
			Annotations: map[string]string{sim.MemoryAnnotation: "app=100Mi+10Mi/s", sim.CPUAnnotation: "app=500m"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "app:1"}}},
	}
	_, err = cl.CreatePod(ctx, pod)
	require.NoError(t, err)
	require.NoError(t, cl.RunFor(ctx, 10*time.Second))
	sp, err := stats.New(stats.Config{NodeName: "node-a", Runtime: n.Runtime(), Clock: cl.Clock()})
	require.NoError(t, err)

	avail := func() (uint64, uint64) {
		s, err := sp.Summary(ctx, true)
		require.NoError(t, err)
		require.Len(t, s.Pods, 1)
		return *s.Node.Memory.AvailableBytes, *s.Pods[0].Memory.WorkingSetBytes
	}
	before, ws := avail()
	assert.Greater(t, ws, uint64(100<<20), "grown since the start")
	require.NoError(t, cl.RunFor(ctx, 60*time.Second))
	after, ws2 := avail()
	assert.Equal(t, uint64(600<<20), ws2-ws, "10Mi/s for 60s")
	assert.Equal(t, before-after, ws2-ws, "the node loses what the pod gains")
}
