package podconfig

import (
	"encoding/binary"
	"hash/maphash"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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

	// Scratch copies of a spec without its resource lists; see spec.
	scratch     v1.PodSpec
	res         v1.ResourceRequirements
	inits, ctrs []v1.Container
	ephs        []v1.EphemeralContainer

	// broken counts encodings that failed; each failure yields a fresh
	// fingerprint so the pod is treated as changed rather than equal.
	broken uint64
}

func newFingerprinter() *fingerprinter {
	f := &fingerprinter{seed: maphash.MakeSeed()} // buf: at the first pod
	f.h.SetSeed(f.seed)
	return f
}

// minFingerprintBuf is the least buffer the fingerprinter allocates.
const minFingerprintBuf = 1 << 10

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
	if f.buf == nil {
		// Allocated on first use and sized to the pod (twice its
		// encoding, which leaves room for the node's next pods to grow):
		// a node's pod config holds one for as long as it runs, an idle
		// node (a simulator's thousand) never fingerprints a pod, and one
		// with a few pods should not keep 16 KiB for them (16 MiB in a
		// process of 1,000 simulated nodes).
		f.buf = make([]byte, max(minFingerprintBuf, 2*m.Size()))
	}
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
	var parts [6 * 8]byte
	b := parts[:0]
	b = binary.LittleEndian.AppendUint64(b, f.spec(&p.Spec))
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

// spec fingerprints a pod spec. Resource lists are hashed apart from the
// protobuf encoding: the generated code renders every quantity with
// Quantity.String on a copy of the map value, which allocates each time for
// a value not in canonical form (such as "128Mi"). So the spec is encoded
// from a scratch shallow copy whose containers carry no resource lists, and
// the quantities are hashed by value.
func (f *fingerprinter) spec(s *v1.PodSpec) uint64 {
	f.scratch = *s
	f.scratch.Overhead = nil
	if s.Resources != nil {
		f.res = v1.ResourceRequirements{Claims: s.Resources.Claims}
		f.scratch.Resources = &f.res
	}
	f.inits = stripResources(f.inits[:0], s.InitContainers)
	f.ctrs = stripResources(f.ctrs[:0], s.Containers)
	f.ephs = f.ephs[:0]
	for _, c := range s.EphemeralContainers {
		c.Resources = v1.ResourceRequirements{Claims: c.Resources.Claims}
		f.ephs = append(f.ephs, c)
	}
	f.scratch.InitContainers, f.scratch.Containers, f.scratch.EphemeralContainers = f.inits, f.ctrs, f.ephs
	encoded := f.encoded(&f.scratch)
	// Drop the scratch's references into the pod.
	f.scratch, f.res = v1.PodSpec{}, v1.ResourceRequirements{}
	clear(f.inits)
	clear(f.ctrs)
	clear(f.ephs)

	var sum uint64
	for i := range s.InitContainers {
		sum += f.resources('i', i, &s.InitContainers[i].Resources)
	}
	for i := range s.Containers {
		sum += f.resources('c', i, &s.Containers[i].Resources)
	}
	for i := range s.EphemeralContainers {
		sum += f.resources('e', i, &s.EphemeralContainers[i].Resources)
	}
	sum += f.resourceList('o', 0, 'l', s.Overhead)
	if s.Resources != nil {
		sum += f.resources('p', 0, s.Resources)
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], encoded)
	binary.LittleEndian.PutUint64(b[8:], sum)
	f.h.Reset()
	_, _ = f.h.Write(b[:])
	return f.h.Sum64()
}

func stripResources(dst, src []v1.Container) []v1.Container {
	for _, c := range src {
		c.Resources = v1.ResourceRequirements{Claims: c.Resources.Claims}
		dst = append(dst, c)
	}
	return dst
}

func (f *fingerprinter) resources(kind byte, index int, r *v1.ResourceRequirements) uint64 {
	return f.resourceList(kind, index, 'l', r.Limits) + f.resourceList(kind, index, 'r', r.Requests)
}

// resourceList sums order-independent hashes of (where, name, value).
func (f *fingerprinter) resourceList(kind byte, index int, list byte, m v1.ResourceList) uint64 {
	var sum uint64
	var hdr [6]byte
	hdr[0], hdr[1] = kind, list
	binary.LittleEndian.PutUint32(hdr[2:], uint32(index))
	for name, q := range m {
		f.h.Reset()
		_, _ = f.h.Write(hdr[:])
		_, _ = f.h.WriteString(string(name))
		_ = f.h.WriteByte(0)
		f.writeQuantity(&q)
		sum += f.h.Sum64()
	}
	return sum
}

// writeQuantity writes q's value: equal quantities write the same bytes
// whatever their notation. Integers and whole milli-units (nearly every
// resource quantity) are written without allocating.
func (f *fingerprinter) writeQuantity(q *resource.Quantity) {
	// The path taken depends on the value alone, so equal values agree.
	var b [9]byte
	if m := q.MilliValue(); resource.NewMilliQuantity(m, q.Format).Cmp(*q) == 0 {
		b[0] = 'm'
		binary.LittleEndian.PutUint64(b[1:], uint64(m))
		_, _ = f.h.Write(b[:])
		return
	}
	if v, ok := q.AsInt64(); ok { // beyond milli-units' int64 range
		b[0] = 'i'
		binary.LittleEndian.PutUint64(b[1:], uint64(v))
		_, _ = f.h.Write(b[:])
		return
	}
	// Rare: the canonical decimal form identifies the value, whatever the
	// notation (a BinarySI "1Ei" is written as its decimal digits). It works
	// on a copy since AsDec and String modify their receiver.
	c := q.DeepCopy()
	canonical := resource.NewDecimalQuantity(*c.AsDec(), resource.DecimalSI)
	_ = f.h.WriteByte('s')
	_, _ = f.h.WriteString(canonical.String())
}

// warmQuantities fills the cached string form of every quantity of p that
// the protobuf encoding reaches other than through a map (whose values it
// encodes from copies). Quantity.String writes that cache on first use, so
// encoding a pod whose caches are cold writes to it; warmed before the pod
// goes out, a later encoding (the fingerprints of a stored pod) only reads
// it, however many goroutines read the pod meanwhile. The places are those
// of k8s.io/api's PodSpec and PodStatus; TestWarmQuantitiesReachesEveryQuantity
// finds them by reflection, so a new one fails that test.
func warmQuantities(p *v1.Pod) {
	for i := range p.Spec.InitContainers {
		warmEnv(p.Spec.InitContainers[i].Env)
	}
	for i := range p.Spec.Containers {
		warmEnv(p.Spec.Containers[i].Env)
	}
	for i := range p.Spec.EphemeralContainers {
		warmEnv(p.Spec.EphemeralContainers[i].Env)
	}
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i].VolumeSource
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
			_ = v.EmptyDir.SizeLimit.String()
		}
		if v.DownwardAPI != nil {
			warmDownwardAPI(v.DownwardAPI.Items)
		}
		if v.Projected != nil {
			for j := range v.Projected.Sources {
				if d := v.Projected.Sources[j].DownwardAPI; d != nil {
					warmDownwardAPI(d.Items)
				}
			}
		}
	}
	for i := range p.Status.NodeAllocatableResourceClaimStatuses {
		s := &p.Status.NodeAllocatableResourceClaimStatuses[i]
		for j := range s.Mapping {
			_ = s.Mapping[j].Quantity.String()
		}
		for j := range s.Overhead {
			_ = s.Overhead[j].PerPod.String()
			_ = s.Overhead[j].PerContainer.String()
		}
	}
}

func warmEnv(env []v1.EnvVar) {
	for i := range env {
		if f := env[i].ValueFrom; f != nil && f.ResourceFieldRef != nil {
			_ = f.ResourceFieldRef.Divisor.String()
		}
	}
}

func warmDownwardAPI(items []v1.DownwardAPIVolumeFile) {
	for i := range items {
		if r := items[i].ResourceFieldRef; r != nil {
			_ = r.Divisor.String()
		}
	}
}
