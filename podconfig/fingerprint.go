package podconfig

import (
	"encoding/binary"
	"hash/maphash"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podutil"
)

// fingerprinter reduces the parts of a pod that the kubelet compares to two
// 64-bit fingerprints, so that change detection on a SET costs one encoding
// of each incoming pod instead of reflect.DeepEqual against the stored one.
//
// The spec and status are hashed through their generated protobuf encoding
// (deterministic: map keys sorted, no reflection) into a reused buffer;
// labels and annotations through an order-independent sum of per-entry
// hashes. The comparison is semantic rather than reflect.DeepEqual's: a nil
// and an empty slice or map are equal, and so are "1000m" and "1" as
// quantities. Two different pods collide with probability 2^-64.
//
// Not safe for concurrent use; the storage calls it under its merge lock.
type fingerprinter struct {
	seed maphash.Seed
	h    maphash.Hash
	buf  []byte
	// broken counts encodings that failed; each failure yields a fresh
	// fingerprint so the pod is treated as changed rather than equal.
	broken uint64
}

func newFingerprinter() *fingerprinter {
	f := &fingerprinter{seed: maphash.MakeSeed(), buf: make([]byte, 16<<10)}
	f.h.SetSeed(f.seed)
	return f
}

type marshaler interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// encoded hashes m's protobuf encoding. The generated MarshalToSizedBuffer
// writes backwards from the end of any buffer large enough, so it runs
// straight into the reused buffer; only when the buffer is too small (the
// generated code then panics on the index) is the exact Size computed, which
// would otherwise cost a second walk of every pod.
func (f *fingerprinter) encoded(m marshaler) uint64 {
	n, ok := f.tryMarshal(m)
	if !ok {
		size := m.Size()
		f.buf = make([]byte, 2*size)
		if n, ok = f.tryMarshal(m); !ok {
			f.broken++
			return f.broken ^ 0x9e3779b97f4a7c15
		}
	}
	f.h.Reset()
	_, _ = f.h.Write(f.buf[len(f.buf)-n:])
	return f.h.Sum64()
}

func (f *fingerprinter) tryMarshal(m marshaler) (n int, ok bool) {
	defer func() {
		if recover() != nil {
			n, ok = 0, false
		}
	}()
	n, err := m.MarshalToSizedBuffer(f.buf)
	return n, err == nil
}

func (f *fingerprinter) mapSum(m map[string]string, skipLocal bool) uint64 {
	var sum, n uint64
	for k, v := range m {
		if skipLocal && isLocalAnnotation(k) {
			continue
		}
		f.h.Reset()
		_, _ = f.h.WriteString(k)
		_ = f.h.WriteByte(0)
		_, _ = f.h.WriteString(v)
		sum += f.h.Sum64()
		n++
	}
	return sum ^ (n * 0xff51afd7ed558ccd)
}

// semantic fingerprints what makes a pod UPDATE in the kubelet: spec, labels,
// deletion timestamp and grace period, and annotations other than the
// config.* bookkeeping ones.
func (f *fingerprinter) semantic(p *v1.Pod) uint64 {
	warmQuantities(&p.Spec)
	var parts [6 * 8]byte
	b := parts[:0]
	b = binary.LittleEndian.AppendUint64(b, f.encoded(&p.Spec))
	b = binary.LittleEndian.AppendUint64(b, f.mapSum(p.Labels, false))
	b = binary.LittleEndian.AppendUint64(b, f.mapSum(p.Annotations, true))
	var ts, grace, flags uint64
	if p.DeletionTimestamp != nil {
		flags |= 1
		ts = uint64(p.DeletionTimestamp.UnixNano())
	}
	if p.DeletionGracePeriodSeconds != nil {
		flags |= 2
		grace = uint64(*p.DeletionGracePeriodSeconds)
	}
	b = binary.LittleEndian.AppendUint64(b, ts)
	b = binary.LittleEndian.AppendUint64(b, grace)
	b = binary.LittleEndian.AppendUint64(b, flags)
	f.h.Reset()
	_, _ = f.h.Write(b)
	return f.h.Sum64()
}

// status fingerprints the pod's status, whose sole change is a RECONCILE.
func (f *fingerprinter) status(p *v1.Pod) uint64 {
	return f.encoded(&p.Status)
}

// isLocalAnnotation reports whether k is one of the annotations the agent
// itself keeps on a pod (config.source, config.mirror, config.seen): they do
// not make a pod differ, and the stored pod's values survive an update.
func isLocalAnnotation(k string) bool {
	switch k {
	case podutil.ConfigSourceAnnotationKey, podutil.ConfigMirrorAnnotationKey, podutil.ConfigFirstSeenAnnotationKey:
		return true
	}
	return false
}

// warmQuantities stores each resource quantity of spec back into its map with
// its canonical string cached. The generated protobuf code reads map values
// by copy, so it would otherwise render every uncached quantity (such as
// "128Mi") twice per encoding, allocating each time. It modifies the
// incoming pod, which the storage owns by then, without changing its value.
func warmQuantities(spec *v1.PodSpec) {
	warm := func(m v1.ResourceList) {
		for k, q := range m {
			_ = q.String() // fills q's cache
			m[k] = q
		}
	}
	for _, cs := range [2][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			warm(cs[i].Resources.Limits)
			warm(cs[i].Resources.Requests)
		}
	}
	for i := range spec.EphemeralContainers {
		warm(spec.EphemeralContainers[i].Resources.Limits)
		warm(spec.EphemeralContainers[i].Resources.Requests)
	}
	warm(spec.Overhead)
	if spec.Resources != nil {
		warm(spec.Resources.Limits)
		warm(spec.Resources.Requests)
	}
}
