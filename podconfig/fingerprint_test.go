package podconfig

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
