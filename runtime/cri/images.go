package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// puller ensures images are present: pull policy, QPS/burst, serialized or
// bounded-parallel pulls and pull back-off, as the kubelet's image manager.
type puller struct {
	img     runtimeapi.ImageServiceClient
	clock   clock.PassiveClock
	backoff *runtime.Backoff
	limit   *tokenBucket // nil: no limit
	slots   chan struct{}
	timeout time.Duration
	// sizes: look up a pulled image's size for the Pulled event, only
	// when events are recorded.
	sizes bool
}

func newPuller(c Config, img runtimeapi.ImageServiceClient) *puller {
	p := &puller{
		img:     img,
		clock:   c.Clock,
		backoff: c.ImagePullBackoff,
		slots:   make(chan struct{}, c.MaxParallelImagePulls),
		timeout: c.CallTimeout,
		sizes:   c.Recorder != nil,
	}
	if c.RegistryPullQPS > 0 {
		p.limit = newTokenBucket(c.RegistryPullQPS, c.RegistryBurst, c.Clock)
	}
	return p
}

// eventFunc records an event about container name of pod (see
// Manager.recordContainer).
type eventFunc func(pod *v1.Pod, name, id, eventType, reason, msgFmt string, args ...any)

// ensure returns the image reference to create c from, recording the
// kubelet's image events with ev. Its error wraps ErrInvalidImageName,
// ErrImageInspect, ErrImageNeverPull, ErrImagePull or ErrImagePullBackOff;
// msg is the message for the container's status.
func (p *puller) ensure(ctx context.Context, pod *v1.Pod, c *v1.Container, sandbox *runtimeapi.PodSandboxConfig, pullSecrets []v1.Secret, ev eventFunc) (ref, msg string, err error) {
	image := strings.TrimSpace(c.Image)
	if image == "" || strings.ContainsAny(image, " \t\n") {
		msg = fmt.Sprintf("Failed to apply default image tag %q: invalid reference format", c.Image)
		ev(pod, c.Name, "", v1.EventTypeWarning, runtime.EventInspectFailed, "%s", msg)
		return "", msg, fmt.Errorf("%w: %s", runtime.ErrInvalidImageName, msg)
	}
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image, Annotations: sandbox.GetAnnotations()}
	policy := podutil.PullPolicy(c)
	if policy != v1.PullAlways {
		cctx, cancel := context.WithTimeout(ctx, p.timeout)
		resp, err := p.img.ImageStatus(cctx, &runtimeapi.ImageStatusRequest{Image: spec})
		cancel()
		if err != nil {
			msg = fmt.Sprintf("Failed to inspect image %q: %v", image, err)
			ev(pod, c.Name, "", v1.EventTypeWarning, runtime.EventInspectFailed, "%s", msg)
			return "", msg, fmt.Errorf("%w: %s", runtime.ErrImageInspect, msg)
		}
		if img := resp.GetImage(); img != nil {
			ev(pod, c.Name, "", v1.EventTypeNormal, runtime.EventPulled, "Container image %q already present on machine", c.Image)
			return img.Id, "", nil
		}
		if policy == v1.PullNever {
			msg = fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
			ev(pod, c.Name, "", v1.EventTypeWarning, runtime.EventErrImageNeverPull, "%s", msg)
			return "", msg, fmt.Errorf("%w: %s", runtime.ErrImageNeverPull, msg)
		}
	}
	// The back-off runs from the last failed pull (Next), as the kubelet's
	// IsInBackOffSinceUpdate.
	key := string(pod.UID) + "_" + image
	if left := p.backoff.RemainingSinceUpdate(key, p.clock.Now()); left > 0 {
		msg = fmt.Sprintf("Back-off pulling image %q", image)
		ev(pod, c.Name, "", v1.EventTypeNormal, runtime.EventBackOff, "%s", msg)
		return "", msg, runtime.BackOffError(fmt.Errorf("%w: %s", runtime.ErrImagePullBackOff, msg), left)
	}
	ev(pod, c.Name, "", v1.EventTypeNormal, runtime.EventPulling, "Pulling image %q", c.Image)
	start := p.clock.Now()
	ref, took, err := p.pull(ctx, spec, sandbox, credentials(image, pullSecrets))
	if err != nil {
		p.backoff.Next(key, p.clock.Now())
		msg = fmt.Sprintf("Failed to pull image %q: %v", image, err)
		ev(pod, c.Name, "", v1.EventTypeWarning, runtime.EventFailed, "%s", msg)
		return "", msg, fmt.Errorf("%w: %s", runtime.ErrImagePull, msg)
	}
	total := p.clock.Since(start)
	ev(pod, c.Name, "", v1.EventTypeNormal, runtime.EventPulled, "Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.",
		c.Image, took.Truncate(time.Millisecond), total.Truncate(time.Millisecond), p.size(ctx, spec))
	// A pull that worked starts its key's back-off over; entries expired
	// since (pods gone while their pulls failed) are dropped, as the
	// kubelet's image manager does after a pull.
	p.backoff.Reset(key)
	p.backoff.GC()
	return ref, "", nil
}

// size is the image's size, 0 if the runtime does not tell or no event
// needs it.
func (p *puller) size(ctx context.Context, spec *runtimeapi.ImageSpec) uint64 {
	if !p.sizes {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	resp, err := p.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec})
	if err != nil {
		return 0
	}
	return resp.GetImage().GetSize()
}

// pull pulls with each matching credential in turn until one works, or
// anonymously when none matches; took is how long the runtime pulled,
// without waiting for a turn.
func (p *puller) pull(ctx context.Context, spec *runtimeapi.ImageSpec, sandbox *runtimeapi.PodSandboxConfig, auths []*runtimeapi.AuthConfig) (ref string, took time.Duration, err error) {
	if p.limit != nil && !p.limit.tryTake() {
		return "", 0, fmt.Errorf("pull QPS exceeded")
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return "", 0, ctx.Err()
	}
	defer func() { <-p.slots }()
	start := p.clock.Now()
	if len(auths) == 0 {
		auths = []*runtimeapi.AuthConfig{nil}
	}
	var errs []error
	for _, auth := range auths {
		resp, err := p.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec, Auth: auth, SandboxConfig: sandbox})
		if err == nil {
			return resp.ImageRef, p.clock.Since(start), nil
		}
		errs = append(errs, err)
	}
	return "", p.clock.Since(start), errors.Join(errs...)
}

// tokenBucket is a token bucket of burst tokens refilled at qps per second.
type tokenBucket struct {
	mu     sync.Mutex
	clock  clock.PassiveClock
	qps    float64
	burst  float64
	tokens float64
	last   time.Time
}

func newTokenBucket(qps float64, burst int, clk clock.PassiveClock) *tokenBucket {
	if burst < 1 {
		burst = 1
	}
	return &tokenBucket{clock: clk, qps: qps, burst: float64(burst), tokens: float64(burst), last: clk.Now()}
}

func (b *tokenBucket) tryTake() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.qps)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// PullImage pulls image (subject to the pull QPS and parallelism limits)
// with the matching credentials of pullSecrets and returns its reference.
func (m *Manager) PullImage(ctx context.Context, image string, pullSecrets []v1.Secret) (string, error) {
	ref, _, err := m.images.pull(ctx, &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image}, nil, credentials(image, pullSecrets))
	if err != nil {
		return "", fmt.Errorf("cri PullImage %q: %w: %w", image, runtime.ErrImagePull, err)
	}
	return ref, nil
}

// ListImages lists the runtime's images.
func (m *Manager) ListImages(ctx context.Context) ([]runtime.Image, error) {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	resp, err := m.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, wrapErr("ListImages", err)
	}
	out := make([]runtime.Image, 0, len(resp.Images))
	for _, i := range resp.Images {
		out = append(out, runtime.Image{ID: i.Id, RepoTags: i.RepoTags, Size: i.Size, Pinned: i.Pinned})
	}
	return out, nil
}

// RemoveImage removes an image.
func (m *Manager) RemoveImage(ctx context.Context, image string) error {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	if _, err := m.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		return wrapErr("RemoveImage", err)
	}
	return nil
}

var _ runtime.ImageFsInfoer = (*Manager)(nil)

// ImageFsInfo reports the image filesystems' usage (CRI ImageFsInfo) and
// their capacity, free space and inodes, from statfs of their mount
// points as the kubelet's cadvisor does; a mount point this process cannot
// stat (a runtime on another host) leaves them 0.
func (m *Manager) ImageFsInfo(ctx context.Context) (runtime.ImageFsStats, error) {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	resp, err := m.img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return runtime.ImageFsStats{}, wrapErr("ImageFsInfo", err)
	}
	var st runtime.ImageFsStats
	seen := map[string]bool{}
	for _, fs := range resp.GetImageFilesystems() {
		st.UsedBytes += fs.GetUsedBytes().GetValue()
		st.InodesUsed += fs.GetInodesUsed().GetValue()
		mp := fs.GetFsId().GetMountpoint()
		if mp == "" || seen[mp] {
			continue
		}
		seen[mp] = true
		fi := statFs(mp)
		st.CapacityBytes += fi.capacity
		st.AvailableBytes += fi.available
		st.Inodes += fi.inodes
		st.InodesFree += fi.inodesFree
	}
	return st, nil
}
