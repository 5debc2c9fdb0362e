package fake

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// GarbageCollect removes dead (exited or created) containers older than
// policy.MinAge beyond policy.MaxPerPodContainer per pod and container name
// and beyond policy.MaxContainers in all, oldest first; then stopped
// sandboxes that are not their pod's newest and hold no container; then pods
// left with nothing. With allSourcesReady it also removes every pod
// policy.PodState lets go once nothing of it runs; without a PodState, every
// pod that KillPod stopped (and no SyncPod restarted), which stands in for
// the kubelet's "pod is deleted" check.
func (r *Runtime) GarbageCollect(ctx context.Context, policy runtime.GCPolicy, allSourcesReady bool) error {
	if err := r.enter(ctx, mGarbageCollect, ""); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	removable := func(p *podState) bool { return p.killed }
	if policy.PodState != nil {
		removable = func(p *podState) bool { return policy.PodState.ShouldPodContentBeRemoved(p.uid) }
	}

	type dead struct {
		p *podState
		c *container
	}
	var survivors []dead
	// A copy: removePod may compact r.order.
	for _, p := range slices.Clone(r.order) {
		if p.removed {
			continue
		}
		r.settle(p, now)
		if allSourcesReady && removable(p) && !slices.ContainsFunc(p.containers, (*container).running) &&
			!slices.ContainsFunc(p.sandboxes, func(s *sandbox) bool { return s.state == runtime.SandboxStateReady }) {
			r.removePod(p)
			continue
		}
		// Per name, the newest dead instances first.
		perName := map[string]int{}
		remove := map[*container]bool{}
		for i := len(p.containers) - 1; i >= 0; i-- {
			c := p.containers[i]
			if c.running() || now.Sub(c.createdAt) < policy.MinAge {
				continue
			}
			perName[c.name]++
			if policy.MaxPerPodContainer >= 0 && perName[c.name] > policy.MaxPerPodContainer {
				remove[c] = true
				continue
			}
			survivors = append(survivors, dead{p, c})
		}
		if len(remove) > 0 {
			p.containers = slices.DeleteFunc(p.containers, func(c *container) bool {
				if remove[c] {
					r.emit(p, c, runtime.ContainerDeletedEvent)
				}
				return remove[c]
			})
		}
	}
	if policy.MaxContainers >= 0 && len(survivors) > policy.MaxContainers {
		sort.SliceStable(survivors, func(i, j int) bool { return survivors[i].c.createdAt.Before(survivors[j].c.createdAt) })
		for _, d := range survivors[:len(survivors)-policy.MaxContainers] {
			d.p.containers = slices.DeleteFunc(d.p.containers, func(c *container) bool { return c == d.c })
			r.emit(d.p, d.c, runtime.ContainerDeletedEvent)
		}
	}
	for _, p := range slices.Clone(r.order) {
		if p.removed {
			continue
		}
		newest := p.newestSandbox()
		p.sandboxes = slices.DeleteFunc(p.sandboxes, func(s *sandbox) bool {
			return s != newest && s.state != runtime.SandboxStateReady &&
				!slices.ContainsFunc(p.containers, func(c *container) bool { return c.sandboxID == s.id })
		})
		if len(p.containers) == 0 && len(p.sandboxes) == 0 {
			r.removePod(p)
		}
	}
	return nil
}

// PullImage pulls image (ErrImagePull if a behaviour says so) and returns its
// ID.
func (r *Runtime) PullImage(ctx context.Context, image string, _ []v1.Secret) (string, error) {
	if strings.TrimSpace(image) == "" {
		r.mu.Lock()
		r.record(mPullImage, "")
		r.mu.Unlock()
		return "", fmt.Errorf("fake: empty image name: %w", runtime.ErrInvalidImageName)
	}
	id, err := r.pull(ctx, image, "", nil)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %w", runtime.ErrImagePull, image, err)
	}
	return id, nil
}

// ListImages lists the images present, sorted by reference.
func (r *Runtime) ListImages(ctx context.Context) ([]runtime.Image, error) {
	if err := r.enter(ctx, mListImages, ""); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]runtime.Image, 0, len(r.images))
	for ref, id := range r.images {
		out = append(out, runtime.Image{ID: id, RepoTags: []string{ref}, Size: imageSize, Pinned: r.pinned[ref]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RepoTags[0] < out[j].RepoTags[0] })
	return out, nil
}

// imageSize is the size of every image of the fake.
const imageSize = 1 << 20

var _ runtime.ImageFsInfoer = (*Runtime)(nil)

// ImageFsInfo reports 1 MiB (and an inode) per image present, on a
// filesystem of the capacity SetImageFsCapacity gave (0, unknown, until
// then), which also holds the running containers' writable layers.
func (r *Runtime) ImageFsInfo(context.Context) (runtime.ImageFsStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := runtime.ImageFsStats{UsedBytes: uint64(len(r.images)) * imageSize, CapacityBytes: r.imageFsCap, InodesUsed: uint64(len(r.images))}
	if r.imageFsCap != 0 {
		used := st.UsedBytes + r.writableLayersLocked(r.clock.Now(), nil)
		st.AvailableBytes = r.imageFsCap - min(used, r.imageFsCap)
	}
	return st, nil
}

// SetImageFsCapacity sets the image filesystem's capacity ImageFsInfo
// reports, for image garbage collection tests.
func (r *Runtime) SetImageFsCapacity(bytes uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.imageFsCap = bytes
}

// SetImagePinned marks the image of reference ref pinned (ListImages
// reports it so) or not.
func (r *Runtime) SetImagePinned(ref string, pinned bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pinned == nil {
		r.pinned = map[string]bool{}
	}
	r.pinned[ref] = pinned
}

// RemoveImage removes an image by reference or ID; an image that is not
// present gives an error wrapping runtime.ErrNotFound.
func (r *Runtime) RemoveImage(ctx context.Context, image string) error {
	if err := r.enter(ctx, mRemoveImage, ""); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	found := false
	for ref, id := range r.images {
		if ref == image || id == image {
			delete(r.images, ref)
			delete(r.pulledAt, ref)
			found = true
		}
	}
	if !found {
		return fmt.Errorf("fake: image %q: %w", image, runtime.ErrNotFound)
	}
	return nil
}

// ExitContainer makes the running instance of the named container of a pod
// exit now with code, as if it crashed or was OOM-killed (reason, e.g.
// "OOMKilled"; empty derives "Completed" or "Error" from code). It returns an
// error wrapping runtime.ErrNotFound if no such container runs.
func (r *Runtime) ExitContainer(uid types.UID, name string, code int, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.runningContainer(uid, name)
	if c == nil {
		return fmt.Errorf("fake: no running container %q in pod %s: %w", name, uid, runtime.ErrNotFound)
	}
	r.stop(r.pods[uid], c, r.clock.Now(), code, reason)
	return nil
}

// SetContainerUnknown puts the running instance of the named container in
// the unknown state, as a runtime that lost track of it would report.
func (r *Runtime) SetContainerUnknown(uid types.UID, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.runningContainer(uid, name)
	if c == nil {
		return fmt.Errorf("fake: no running container %q in pod %s: %w", name, uid, runtime.ErrNotFound)
	}
	c.state, c.exitAt = runtime.ContainerStateUnknown, time.Time{}
	return nil
}

// runningContainer returns the newest running instance; r.mu must be held.
func (r *Runtime) runningContainer(uid types.UID, name string) *container {
	p, ok := r.pods[uid]
	if !ok {
		return nil
	}
	r.settle(p, r.clock.Now())
	if c := p.newest(name); c != nil && c.state == runtime.ContainerStateRunning {
		return c
	}
	return nil
}

// StopSandbox stops the pod's ready sandbox, as a crash or a node restart
// would; its running containers die with exit code 137. It returns an error
// wrapping runtime.ErrNotFound if the pod has no ready sandbox.
func (r *Runtime) StopSandbox(uid types.UID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return fmt.Errorf("fake: pod %s: %w", uid, runtime.ErrNotFound)
	}
	s := p.newestSandbox()
	if s == nil || s.state != runtime.SandboxStateReady {
		return fmt.Errorf("fake: pod %s has no ready sandbox: %w", uid, runtime.ErrNotFound)
	}
	now := r.clock.Now()
	r.settle(p, now)
	s.state = runtime.SandboxStateNotReady
	for _, c := range p.containers {
		if c.sandboxID == s.id && c.running() {
			r.stop(p, c, now, 137, "Error")
		}
	}
	return nil
}

// RemovePod forgets a pod at once, as garbage collection would.
func (r *Runtime) RemovePod(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.pods[uid]; ok {
		r.removePod(p)
	}
}
