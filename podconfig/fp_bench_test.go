package podconfig

import "testing"

func BenchmarkFingerprint(b *testing.B) {
	f := newFingerprinter()
	p := benchPod(1, "img")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		f.semantic(p)
	}
}

func BenchmarkFingerprintStatus(b *testing.B) {
	f := newFingerprinter()
	p := benchPod(1, "img")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		f.status(p)
	}
}
