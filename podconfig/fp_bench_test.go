package podconfig

import (
	"testing"

	"github.com/nodekit/nodekit/podconfig/podconfigtest"
)

func BenchmarkFingerprint(b *testing.B) {
	f := newFingerprinter()
	p := podconfigtest.WorkloadPod(1, "img")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		f.semantic(p)
	}
}

func BenchmarkFingerprintStatus(b *testing.B) {
	f := newFingerprinter()
	p := podconfigtest.WorkloadPod(1, "img")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		f.status(p)
	}
}
