package podconfig

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/podconfig/podconfigtest"
)

func TestQuantityFingerprintIsByValue(t *testing.T) {
	f := newFingerprinter()
	hash := func(s string) uint64 {
		q := resource.MustParse(s)
		return f.resourceList('c', 0, 'l', v1.ResourceList{v1.ResourceCPU: q})
	}
	for _, tc := range []struct {
		a, b  string
		equal bool
	}{
		{"1", "1000m", true},
		{"128Mi", "134217728", true},
		{"1k", "1000", true},
		{"100m", "0.1", true},
		{"1Ei", "1152921504606846976", true},
		{"0.5n", "0.0005u", true},
		{"1", "2", false},
		{"100m", "101m", false},
		{"0.5n", "1n", true}, // parsing rounds up to nano
		{"1n", "2n", false},
		{"2Ei", "3Ei", false},
		{"1Ei", "1Ei", true},
	} {
		assert.Equal(t, tc.equal, hash(tc.a) == hash(tc.b), "%s vs %s", tc.a, tc.b)
	}
}

func TestFingerprintDoesNotModifyThePod(t *testing.T) {
	f := newFingerprinter()
	p := podconfigtest.WorkloadPod(1, "img")
	before := p.DeepCopy()
	f.semantic(p)
	f.status(p)
	assert.Equal(t, before, p)
}

// quantityPaths lists where a resource.Quantity sits in t other than in a
// map (whose values the protobuf encoding copies before encoding).
func quantityPaths(t reflect.Type, path string, inStruct map[reflect.Type]bool, out *[]string) {
	switch {
	case t == reflect.TypeOf(resource.Quantity{}):
		*out = append(*out, path)
	case t.Kind() == reflect.Pointer:
		quantityPaths(t.Elem(), path, inStruct, out)
	case t.Kind() == reflect.Slice:
		quantityPaths(t.Elem(), path+"[]", inStruct, out)
	case t.Kind() == reflect.Struct && !inStruct[t]:
		inStruct[t] = true
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := "." + f.Name
			if f.Anonymous {
				name = ""
			}
			quantityPaths(f.Type, path+name, inStruct, out)
		}
		delete(inStruct, t)
	}
}

// Encoding a pod calls Quantity.String, which caches its result in the
// quantity: a write. The storage encodes a stored pod, which readers share,
// only after warmQuantities filled every such cache on arrival.
func TestWarmQuantitiesReachesEveryQuantity(t *testing.T) {
	t.Run("the places warmQuantities knows are every place there is", func(t *testing.T) {
		var got []string
		quantityPaths(reflect.TypeOf(v1.Pod{}), "pod", map[reflect.Type]bool{}, &got)
		want := []string{
			// Resource lists (maps) are not here; neither is the pod's
			// metadata, which holds no quantity.
			"pod.Spec.Volumes[].EmptyDir.SizeLimit",
			"pod.Spec.Volumes[].DownwardAPI.Items[].ResourceFieldRef.Divisor",
			"pod.Spec.Volumes[].Projected.Sources[].DownwardAPI.Items[].ResourceFieldRef.Divisor",
			"pod.Spec.InitContainers[].Env[].ValueFrom.ResourceFieldRef.Divisor",
			"pod.Spec.Containers[].Env[].ValueFrom.ResourceFieldRef.Divisor",
			"pod.Spec.EphemeralContainers[].Env[].ValueFrom.ResourceFieldRef.Divisor",
			"pod.Status.NodeAllocatableResourceClaimStatuses[].Mapping[].Quantity",
			"pod.Status.NodeAllocatableResourceClaimStatuses[].Overhead[].PerPod",
			"pod.Status.NodeAllocatableResourceClaimStatuses[].Overhead[].PerContainer",
		}
		assert.ElementsMatch(t, want, got, "a quantity k8s.io/api added or moved: warm it in warmQuantities, then list it here")
	})

	// Every place above, with quantities whose caches are cold.
	cold := func() *v1.Pod {
		q := func() *resource.Quantity { return resource.NewQuantity(1, resource.DecimalSI) }
		env := []v1.EnvVar{{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: *q()}}}}
		items := []v1.DownwardAPIVolumeFile{{Path: "cpu", ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: *q()}}}
		p := &v1.Pod{Spec: v1.PodSpec{
			InitContainers:      []v1.Container{{Name: "i", Env: env}},
			Containers:          []v1.Container{{Name: "c", Env: env}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "e", Env: env}}},
			Volumes: []v1.Volume{
				{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: q()}}},
				{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: items}}},
				{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{DownwardAPI: &v1.DownwardAPIProjection{Items: items}}}}}},
			},
		}}
		p.Status.NodeAllocatableResourceClaimStatuses = []v1.NodeAllocatableResourceClaimStatus{{
			Mapping:  []v1.NodeAllocatableMappedResources{{Quantity: q()}},
			Overhead: []v1.NodeAllocatableOverheadResources{{PerPod: q(), PerContainer: q()}},
		}}
		return p
	}
	for _, tc := range []struct {
		name    string
		warm    bool
		written bool
	}{
		{"a cold pod is written by its encoding", false, true},
		{"a warmed pod is only read by its encoding", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := cold()
			if tc.warm {
				warmQuantities(p)
			}
			before := p.DeepCopy()
			f := newFingerprinter()
			f.semantic(p)
			f.status(p)
			// reflect.DeepEqual sees the quantities' unexported caches.
			assert.Equal(t, tc.written, !reflect.DeepEqual(before, p))
		})
	}
}

// The encoding buffer a pod config keeps is sized to its pods, not a fixed
// 16 KiB, and grows for a larger pod without changing what is equal.
func TestFingerprintBufferFitsThePodsAndGrows(t *testing.T) {
	f := newFingerprinter()
	small := podconfigtest.WorkloadPod(1, "img")
	first := f.semantic(small)
	size := small.Spec.Size()
	assert.LessOrEqual(t, len(f.buf), max(minFingerprintBuf, 2*size), "buffer for a %d-byte spec", size)
	assert.Less(t, len(f.buf), 16<<10)

	big := podconfigtest.WorkloadPod(2, "img")
	for i := range 50 {
		c := big.Spec.Containers[0].DeepCopy()
		c.Name = fmt.Sprintf("c%d", i)
		big.Spec.Containers = append(big.Spec.Containers, *c)
	}
	require.Greater(t, big.Spec.Size(), len(f.buf), "the big pod must not fit the first buffer")
	bigFP := f.semantic(big)
	assert.Equal(t, bigFP, f.semantic(big.DeepCopy()), "the big pod's fingerprint after growing")
	assert.Equal(t, first, f.semantic(small.DeepCopy()), "the small pod's fingerprint after growing")
	assert.NotEqual(t, first, bigFP)
	assert.Zero(t, f.broken)
}
