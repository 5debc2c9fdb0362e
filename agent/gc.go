package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/nodekit/nodekit/runtime"
)

// Kubelet defaults of garbage collection.
const (
	DefaultContainerGCPeriod    = time.Minute
	DefaultImageGCPeriod        = 5 * time.Minute
	DefaultImageGCHighThreshold = 85
	DefaultImageGCLowThreshold  = 80
	DefaultImageMinimumGCAge    = 2 * time.Minute
)

// DefaultContainerGCPolicy returns the kubelet's policy: dead containers of
// any age, the newest dead instance of each container kept (its restart
// count and last state need it), no limit in all. A function, not a
// variable, so that no caller can change the default of every agent.
func DefaultContainerGCPolicy() runtime.GCPolicy {
	return runtime.GCPolicy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}
}

// containerGCPolicy is Config.ContainerGCPolicy with the pod workers as its
// PodState (unless it has one): a pod that finished keeps its containers and
// logs until it is deleted, as with the kubelet.
func (a *Agent) containerGCPolicy() runtime.GCPolicy {
	p := *a.cfg.ContainerGCPolicy
	if p.PodState == nil {
		p.PodState = a.workers
	}
	return p
}

// containerGCJob collects dead containers every ContainerGCPeriod, as the
// kubelet's container GC: beyond the policy, and pods no source knows once
// all sources are ready.
func (a *Agent) containerGCJob(gc runtime.GarbageCollector, sourcesReady func() bool) periodic {
	return periodic{a.cfg.ContainerGCPeriod, func(ctx context.Context) {
		if err := gc.GarbageCollect(ctx, a.containerGCPolicy(), sourcesReady()); err != nil && ctx.Err() == nil {
			a.log.Error(err, "Container garbage collection failed")
		}
	}}
}

// imageRuntime is what image GC needs of the runtime.
type imageRuntime interface {
	runtime.ImageService
	runtime.ImageFsInfoer
	GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error)
}

// imageGC is the kubelet's image garbage collector: when the image
// filesystem is fuller than the high threshold it removes unused images,
// least recently used first, none younger than the minimum age, until
// usage is down to the low threshold. An image a container (of any state)
// uses, or a pinned image, is never removed.
type imageGC struct {
	// mu serialises rounds: the periodic one and the eviction manager's.
	mu        sync.Mutex
	rt        imageRuntime
	high, low int
	minAge    time.Duration
	// firstSeen and lastUsed are by image ID.
	firstSeen, lastUsed map[string]time.Time
}

func newImageGC(rt imageRuntime, c Config) *imageGC {
	return &imageGC{rt: rt, high: c.ImageGCHighThresholdPercent, low: c.ImageGCLowThresholdPercent, minAge: c.ImageMinimumGCAge,
		firstSeen: map[string]time.Time{}, lastUsed: map[string]time.Time{}}
}

// collect runs one round at now and returns the bytes freed.
func (g *imageGC) collect(ctx context.Context, now time.Time) (uint64, error) {
	return g.round(ctx, now, false)
}

// deleteUnused removes every unused image past the minimum age, whatever
// the thresholds: the kubelet's DeleteUnusedImages, the eviction manager's
// node-level reclaim of disk.
func (g *imageGC) deleteUnused(ctx context.Context, now time.Time) error {
	_, err := g.round(ctx, now, true)
	return err
}

// round is a round of collect, or with all of deleteUnused.
func (g *imageGC) round(ctx context.Context, now time.Time, all bool) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	images, err := g.rt.ListImages(ctx)
	if err != nil {
		return 0, fmt.Errorf("list images: %w", err)
	}
	pods, err := g.rt.GetPods(ctx, true)
	if err != nil {
		return 0, fmt.Errorf("list pods: %w", err)
	}
	inUse := map[string]bool{}
	for _, p := range pods {
		for _, c := range p.Containers {
			inUse[c.ImageID], inUse[c.Image] = true, true
		}
	}
	present := map[string]bool{}
	for _, img := range images {
		present[img.ID] = true
		if _, ok := g.firstSeen[img.ID]; !ok {
			g.firstSeen[img.ID] = now
		}
		if used(img, inUse) {
			g.lastUsed[img.ID] = now
		}
	}
	for id := range g.firstSeen {
		if !present[id] {
			delete(g.firstSeen, id)
			delete(g.lastUsed, id)
		}
	}

	st, err := g.rt.ImageFsInfo(ctx)
	if err != nil {
		return 0, fmt.Errorf("image filesystem info: %w", err)
	}
	var target uint64 = math.MaxUint64
	if !all {
		if st.CapacityBytes == 0 || st.UsedBytes*100 < uint64(g.high)*st.CapacityBytes {
			return 0, nil
		}
		target = st.UsedBytes - st.CapacityBytes*uint64(g.low)/100
	}

	var candidates []runtime.Image
	for _, img := range images {
		if !img.Pinned && !used(img, inUse) && now.Sub(g.firstSeen[img.ID]) >= g.minAge {
			candidates = append(candidates, img)
		}
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		a, b := candidates[i].ID, candidates[j].ID
		if !g.lastUsed[a].Equal(g.lastUsed[b]) {
			return g.lastUsed[a].Before(g.lastUsed[b])
		}
		return g.firstSeen[a].Before(g.firstSeen[b])
	})
	var freed uint64
	var errs []error
	for _, img := range candidates {
		if freed >= target {
			break
		}
		if err := g.rt.RemoveImage(ctx, img.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		freed += img.Size
		delete(g.firstSeen, img.ID)
		delete(g.lastUsed, img.ID)
	}
	if all {
		return freed, errors.Join(errs...)
	}
	if freed < target {
		return freed, fmt.Errorf("freed %d of the %d bytes above the low threshold (%d%%): %v", freed, target, g.low, errs)
	}
	return freed, nil
}

func used(img runtime.Image, inUse map[string]bool) bool {
	if inUse[img.ID] {
		return true
	}
	for _, t := range img.RepoTags {
		if inUse[t] {
			return true
		}
	}
	return false
}

// imageGCJob runs an image GC round every ImageGCPeriod.
func (a *Agent) imageGCJob(g *imageGC) periodic {
	return periodic{a.cfg.ImageGCPeriod, func(ctx context.Context) {
		if freed, err := g.collect(ctx, a.cfg.Clock.Now()); err != nil && ctx.Err() == nil {
			a.log.Error(err, "Image garbage collection failed")
		} else if freed > 0 {
			a.log.V(1).Info("Image garbage collection freed space", "bytes", freed)
		}
	}}
}
