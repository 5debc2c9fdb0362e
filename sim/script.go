package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

// Annotations that script a pod's containers on the in-memory runtime.
// Each takes a comma-separated list of items "[container=]value"; an item
// without a container name applies to every container not named.
const (
	// StartDelayAnnotation: how long each start takes, e.g. "5s" or
	// "db=30s".
	StartDelayAnnotation = "sim.nodekit.io/start-delay"
	// ExitAnnotation: run for a duration, then exit with a code (default
	// 0), e.g. "app=30s:1"; with restartPolicy Always a non-zero code
	// crash-loops under the kubelet's back-off (10s doubling to 5m): from
	// the second exit on, the container is shown waiting CrashLoopBackOff
	// from its exit and restarted exactly when its back-off ends.
	ExitAnnotation = "sim.nodekit.io/exit"
	// ReadyAfterAnnotation: probes (for example a readiness probe) fail
	// until the container has run this long, e.g. "20s": exec probes exit
	// 1, and httpGet, tcpSocket and grpc probes find the port closed.
	ReadyAfterAnnotation = "sim.nodekit.io/ready-after"
	// PullErrorAnnotation: pulling the containers' images fails with this
	// message (ErrImagePull, then ImagePullBackOff); the whole value is the
	// message.
	PullErrorAnnotation = "sim.nodekit.io/pull-error"
	// CPUAnnotation: the CPU a running container uses, a quantity of
	// cores, e.g. "app=500m" (fake.Usage.CPUMilli); its stats report it.
	CPUAnnotation = "sim.nodekit.io/cpu"
	// MemoryAnnotation: a running container's working set, optionally
	// growing per second from its start, e.g. "app=100Mi" or
	// "app=100Mi+10Mi/s", so the node comes under memory pressure on the
	// clock.
	MemoryAnnotation = "sim.nodekit.io/memory"
	// DiskAnnotation: a running container's writable layer, optionally
	// growing per second, e.g. "1Gi+1Mi/s".
	DiskAnnotation = "sim.nodekit.io/disk"
)

// bytesAndGrowth parses "<quantity>[+<quantity>/s]".
func bytesAndGrowth(s string) (base, growth uint64, err error) {
	b, g, grows := strings.Cut(s, "+")
	q, err := resource.ParseQuantity(b)
	if err != nil || q.Sign() < 0 {
		return 0, 0, fmt.Errorf("bad quantity %q", b)
	}
	base = uint64(q.Value())
	if grows {
		per, ok := strings.CutSuffix(g, "/s")
		gq, err := resource.ParseQuantity(per)
		if !ok || err != nil || gq.Sign() < 0 {
			return 0, 0, fmt.Errorf("bad growth %q, want <quantity>/s", g)
		}
		growth = uint64(gq.Value())
	}
	return base, growth, nil
}

// item finds the value for container name in an annotation's list.
func item(list, name string) (string, bool, error) {
	def, hasDef := "", false
	for _, it := range strings.Split(list, ",") {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		n, v, named := strings.Cut(it, "=")
		if !named {
			def, hasDef = it, true
			continue
		}
		if n == "" {
			return "", false, fmt.Errorf("%q: empty container name", it)
		}
		if n == name {
			return v, true, nil
		}
	}
	return def, hasDef, nil
}

func duration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad duration %q", s)
	}
	return d, nil
}

// AnnotationBehavior programs a container from its pod's sim.nodekit.io
// annotations; it is the runtimes' default fake.Config.PodBehavior, and
// fits any runtime/fake that should read the same scripts (nodes on a
// real apiserver, for one). It returns false for a pod without them. A
// malformed annotation fails the container's start with
// CreateContainerConfigError naming it.
func AnnotationBehavior(pod *v1.Pod, c *v1.Container) (fake.Behavior, bool) {
	var b fake.Behavior
	found := false
	bad := func(key string, err error) (fake.Behavior, bool) {
		return fake.Behavior{StartError: fmt.Errorf("annotation %s: %v: %w", key, err, runtime.ErrCreateContainerConfig)}, true
	}
	ann := pod.Annotations
	if v, ok := ann[StartDelayAnnotation]; ok {
		s, ok, err := item(v, c.Name)
		if err != nil {
			return bad(StartDelayAnnotation, err)
		}
		if ok {
			if b.StartLatency, err = duration(s); err != nil {
				return bad(StartDelayAnnotation, err)
			}
			found = true
		}
	}
	if v, ok := ann[ExitAnnotation]; ok {
		s, ok, err := item(v, c.Name)
		if err != nil {
			return bad(ExitAnnotation, err)
		}
		if ok {
			after, code, hasCode := strings.Cut(s, ":")
			if b.ExitAfter, err = duration(after); err != nil {
				return bad(ExitAnnotation, err)
			}
			if hasCode {
				if b.ExitCode, err = strconv.Atoi(code); err != nil || b.ExitCode < 0 || b.ExitCode > 255 {
					return bad(ExitAnnotation, fmt.Errorf("bad exit code %q", code))
				}
			}
			b.Exit, found = true, true
		}
	}
	if v, ok := ann[ReadyAfterAnnotation]; ok {
		s, ok, err := item(v, c.Name)
		if err != nil {
			return bad(ReadyAfterAnnotation, err)
		}
		if ok {
			if b.ReadyAfter, err = duration(s); err != nil {
				return bad(ReadyAfterAnnotation, err)
			}
			found = true
		}
	}
	if v, ok := ann[PullErrorAnnotation]; ok && v != "" {
		b.PullError, found = v, true
	}
	if v, ok := ann[CPUAnnotation]; ok {
		s, ok, err := item(v, c.Name)
		if err != nil {
			return bad(CPUAnnotation, err)
		}
		if ok {
			q, err := resource.ParseQuantity(s)
			if err != nil || q.Sign() < 0 {
				return bad(CPUAnnotation, fmt.Errorf("bad quantity %q", s))
			}
			b.Usage.CPUMilli, found = q.MilliValue(), true
		}
	}
	for _, a := range []struct {
		key          string
		base, growth *uint64
	}{{MemoryAnnotation, &b.Usage.MemoryBytes, &b.Usage.MemoryGrowth}, {DiskAnnotation, &b.Usage.DiskBytes, &b.Usage.DiskGrowth}} {
		v, ok := ann[a.key]
		if !ok {
			continue
		}
		s, ok, err := item(v, c.Name)
		if err != nil {
			return bad(a.key, err)
		}
		if ok {
			if *a.base, *a.growth, err = bytesAndGrowth(s); err != nil {
				return bad(a.key, err)
			}
			found = true
		}
	}
	return b, found
}
