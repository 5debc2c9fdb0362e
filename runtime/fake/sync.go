package fake

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// SyncPod carries out runtime.ComputePodActions(pod, status) on the
// in-memory state, like the kubelet's SyncPod: kill what must go, create the
// sandbox, then start ephemeral, init and regular containers. A regular init
// container that fails to start ends the sync; a sidecar that fails does not.
// Each start checks backoff (crash loop, keyed by runtime.BackoffKey and the
// last exit's FinishedAt) and pulls the image as its pull policy says,
// failing with ErrImagePull and then ErrImagePullBackOff on the fake's own
// pull back-off. A nil status means the runtime's current status; backoff nil
// means no crash-loop back-off.
func (r *Runtime) SyncPod(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus, _ []v1.Secret, backoff *runtime.Backoff) (result runtime.PodSyncResult) {
	var uid types.UID
	if pod != nil {
		uid = pod.UID
	}
	if err := r.enter(ctx, mSyncPod, uid); err != nil {
		result.Fail(err)
		return result
	}
	if pod == nil {
		result.Fail(errors.New("fake: SyncPod of a nil pod"))
		return result
	}

	r.mu.Lock()
	if status == nil {
		status = r.podStatus(pod.UID, pod.Name, pod.Namespace)
	}
	p := r.pod(pod.UID, pod.Name, pod.Namespace)
	p.killed = false
	r.mu.Unlock()

	actions := runtime.ComputePodActions(pod, status)
	if actions.CreateSandbox && actions.SandboxID != "" {
		r.podEvent(pod, v1.EventTypeNormal, runtime.EventSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
	}
	r.log.V(4).Info("SyncPod", "pod", pod.Namespace+"/"+pod.Name, "killPod", actions.KillPod, "createSandbox", actions.CreateSandbox,
		"init", actions.InitContainersToStart, "start", actions.ContainersToStart, "kill", len(actions.ContainersToKill))

	if actions.KillPod {
		r.mu.Lock()
		var ctrs []*container
		for _, c := range p.containers {
			if c.running() {
				ctrs = append(ctrs, c)
			}
		}
		var sbs []*sandbox
		for _, s := range p.sandboxes {
			if s.state == runtime.SandboxStateReady {
				sbs = append(sbs, s)
			}
		}
		r.mu.Unlock()
		kill := r.killPod(ctx, pod, p, ctrs, sbs, nil)
		result.AddPodSyncResult(kill)
		if kill.Error() != nil {
			return result
		}
		if actions.CreateSandbox {
			r.purgeInitContainers(p)
		}
	} else if len(actions.ContainersToKill) > 0 {
		// In a stable order, so that injected faults are reproducible.
		ids := make([]runtime.ContainerID, 0, len(actions.ContainersToKill))
		for id := range actions.ContainersToKill {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b runtime.ContainerID) int { return strings.Compare(a.ID, b.ID) })
		grace := runtime.EffectiveGracePeriod(pod, nil)
		for _, id := range ids {
			k := actions.ContainersToKill[id]
			step := result.NewStep(runtime.KillContainer, k.Name)
			r.mu.Lock()
			c := p.byID(id)
			r.mu.Unlock()
			if c == nil {
				continue // gone already
			}
			if err := r.stopContainers(ctx, pod, p, []*container{c}, []string{k.Message}, grace)[0]; err != nil {
				step.Fail(fmt.Errorf("%w: %w", runtime.ErrKillContainer, err), k.Message)
				return result
			}
		}
	}

	sandboxID := actions.SandboxID
	if actions.CreateSandbox {
		step := result.NewStep(runtime.CreatePodSandbox, string(pod.UID))
		if err := r.enter(ctx, mCreatePodSandbox, pod.UID); err != nil {
			step.Fail(fmt.Errorf("%w: %w", runtime.ErrCreatePodSandbox, err), "")
			r.podEvent(pod, v1.EventTypeWarning, runtime.EventFailedCreateSandbox, "Failed to create pod sandbox: %v", err)
			return result
		}
		sandboxID = r.createSandbox(p, pod, actions.Attempt)
	}

	for _, i := range actions.EphemeralContainersToStart {
		c := (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		_ = r.start(ctx, pod, p, c, kindEphemeral, sandboxID, status, backoff, &result)
	}
	for _, i := range actions.InitContainersToStart {
		c := &pod.Spec.InitContainers[i]
		kind := kindOf(c, true)
		if err := r.start(ctx, pod, p, c, kind, sandboxID, status, backoff, &result); err != nil && kind != kindSidecar {
			return result
		}
	}
	for _, i := range actions.ContainersToStart {
		_ = r.start(ctx, pod, p, &pod.Spec.Containers[i], kindRegular, sandboxID, status, backoff, &result)
	}
	return result
}

// start starts one container and records the step; it returns the step's
// error.
func (r *Runtime) start(ctx context.Context, pod *v1.Pod, p *podState, c *v1.Container, kind containerKind,
	sandboxID string, status *runtime.PodStatus, backoff *runtime.Backoff, result *runtime.PodSyncResult) error {
	action := runtime.StartContainer
	if kind == kindInit || kind == kindSidecar {
		action = runtime.InitContainer
	}
	step := result.NewStep(action, c.Name)
	fail := func(err error, msg string) error {
		step.Fail(err, msg)
		return err
	}
	failed := func(err error, event, msg string) error {
		r.containerEvent(pod, c.Name, v1.EventTypeWarning, runtime.EventFailed, "Error: %s", event)
		return fail(err, msg)
	}

	// Crash-loop back-off, as the kubelet's doBackOff: from the newest exit.
	if msg, err := runtime.CrashLoopBackOff(backoff, pod, c, status); err != nil {
		r.containerEvent(pod, c.Name, v1.EventTypeWarning, runtime.EventBackOff,
			"Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID)
		return fail(err, msg)
	}

	imageID, msg, err := r.ensureImage(ctx, pod, c)
	if err != nil {
		return failed(err, runtime.Reason(err), msg)
	}
	if err := r.enter(ctx, mStartContainer, pod.UID); err != nil {
		return failed(fmt.Errorf("%w: %w", runtime.ErrRunContainer, err), err.Error(), "")
	}

	r.mu.Lock()
	b := r.behavior(pod, c.Name, c.Image)
	r.mu.Unlock()
	if err := r.wait(ctx, b.StartLatency); err != nil {
		return failed(fmt.Errorf("%w: %w", runtime.ErrCreateContainer, err), err.Error(), "")
	}

	ctr, msg, err := r.create(pod, p, c, kind, sandboxID, imageID, b)
	if ctr != nil {
		r.containerEvent(pod, c.Name, v1.EventTypeNormal, runtime.EventCreated, "Created container: %s", c.Name)
	}
	if err != nil {
		return failed(err, msg, msg)
	}
	r.containerEvent(pod, c.Name, v1.EventTypeNormal, runtime.EventStarted, "Started container %s", c.Name)
	r.log.V(3).Info("started container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "id", ctr.id.String())
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		if msg, err := r.postStart(ctx, pod, p, c, ctr); err != nil {
			return fail(err, msg)
		}
	}
	return nil
}

// create adds the container instance and starts it, or fails as b says:
// it returns the instance (nil if none was made), the step's message and
// its error.
func (r *Runtime) create(pod *v1.Pod, p *podState, c *v1.Container, kind containerKind, sandboxID, imageID string, b Behavior) (*container, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := p.sandbox(sandboxID); s == nil || s.state != runtime.SandboxStateReady {
		return nil, fmt.Sprintf("sandbox %q of pod %s/%s is not ready", sandboxID, pod.Namespace, pod.Name), runtime.ErrCreateContainer
	}
	if b.StartError != nil && (errors.Is(b.StartError, runtime.ErrCreateContainer) || errors.Is(b.StartError, runtime.ErrCreateContainerConfig)) {
		return nil, b.StartError.Error(), b.StartError
	}

	now := r.clock.Now()
	ctr := &container{
		id:           runtime.ContainerID{Type: r.typ, ID: fmt.Sprintf("c%d", r.newID())},
		name:         c.Name,
		image:        c.Image,
		imageID:      imageID,
		hash:         runtime.HashContainer(c),
		sandboxID:    sandboxID,
		kind:         kind,
		state:        runtime.ContainerStateRunning,
		createdAt:    now,
		startedAt:    now,
		ignoreTERM:   b.IgnoreTERM,
		termExitCode: b.TermExitCode,
		readyAt:      now.Add(b.ReadyAfter),
		ports:        tcpPorts(c),
		spec:         stopSpec(c),
		usage:        usageState{u: b.Usage, since: now},
	}
	if prev := p.newest(c.Name); prev != nil {
		ctr.restarts = prev.restarts + 1
	}
	p.containers = append(p.containers, ctr)
	r.emit(p, ctr, runtime.ContainerCreatedEvent)

	if b.StartError != nil {
		// Created but the start failed: containerd reports it exited.
		ctr.startedAt = time.Time{}
		ctr.message = b.StartError.Error()
		r.stop(p, ctr, now, 128, "StartError")
		err := b.StartError
		if runtime.Reason(err) == "" {
			err = fmt.Errorf("%w: %w", runtime.ErrRunContainer, err)
		}
		return ctr, b.StartError.Error(), err
	}
	r.emit(p, ctr, runtime.ContainerStartedEvent)
	for _, l := range b.Logs {
		ctr.appendLog(now, "stdout", l)
	}
	if b.Exit {
		ctr.exitAt, ctr.exitWith = now.Add(b.ExitAfter), b.ExitCode
		r.settle(p, now)
		r.scheduleExit(p, ctr, now)
	}
	return ctr, "", nil
}

// ensureImage makes the container's image present as its pull policy asks,
// like the kubelet's image manager: it returns the image ID or a step error
// and its message.
func (r *Runtime) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container) (string, string, error) {
	if c.Image == "" {
		msg := fmt.Sprintf("container %s has no image", c.Name)
		r.containerEvent(pod, c.Name, v1.EventTypeWarning, runtime.EventInspectFailed, "%s", msg)
		return "", msg, runtime.ErrInvalidImageName
	}
	r.mu.Lock()
	id, present := r.images[c.Image]
	// An image this container cannot pull is not there for it, even if
	// another pod's copy is (a per-pod PullError).
	present = present && r.behavior(pod, c.Name, c.Image).PullError == ""
	// An image pulled at this very instant is still being pulled for the
	// others: syncs at the same instant all pull it, whichever runs first,
	// so what they report does not hang on goroutine order.
	present = present && r.clock.Now().After(r.pulledAt[c.Image])
	r.mu.Unlock()
	switch podutil.PullPolicy(c) {
	case v1.PullNever:
		if !present {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
			r.containerEvent(pod, c.Name, v1.EventTypeWarning, runtime.EventErrImageNeverPull, "%s", msg)
			return "", msg, runtime.ErrImageNeverPull
		}
		r.containerEvent(pod, c.Name, v1.EventTypeNormal, runtime.EventPulled, "Container image %q already present on machine", c.Image)
		return id, "", nil
	case v1.PullIfNotPresent:
		if present {
			r.containerEvent(pod, c.Name, v1.EventTypeNormal, runtime.EventPulled, "Container image %q already present on machine", c.Image)
			return id, "", nil
		}
	}

	key := string(pod.UID) + "_" + c.Image
	if left := r.pullBackoff.RemainingSinceUpdate(key, r.clock.Now()); left > 0 {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		r.containerEvent(pod, c.Name, v1.EventTypeNormal, runtime.EventBackOff, "%s", msg)
		return "", msg, runtime.BackOffError(runtime.ErrImagePullBackOff, left)
	}
	r.containerEvent(pod, c.Name, v1.EventTypeNormal, runtime.EventPulling, "Pulling image %q", c.Image)
	start := r.clock.Now()
	id, err := r.pull(ctx, c.Image, c.Name, pod)
	if err != nil {
		r.pullBackoff.Next(key, r.clock.Now())
		stepErr := runtime.ErrImagePull
		if errors.Is(err, ErrInjected) || ctx.Err() != nil {
			stepErr = fmt.Errorf("%w: %w", runtime.ErrImagePull, err)
		}
		msg := fmt.Sprintf("Failed to pull image %q: %v", c.Image, err)
		r.containerEvent(pod, c.Name, v1.EventTypeWarning, runtime.EventFailed, "%s", msg)
		return "", msg, stepErr
	}
	took := r.clock.Since(start).Truncate(time.Millisecond)
	r.containerEvent(pod, c.Name, v1.EventTypeNormal, runtime.EventPulled,
		"Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.", c.Image, took, took, imageSize)
	r.pullBackoff.GC()
	return id, "", nil
}

// pull pulls image, honouring the behaviour of the image (or of the
// container name, when pulled for a container). Its error is the cause,
// without a step sentinel.
func (r *Runtime) pull(ctx context.Context, image, containerName string, pod *v1.Pod) (string, error) {
	var uid types.UID
	if pod != nil {
		uid = pod.UID
	}
	if err := r.enter(ctx, mPullImage, uid); err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.byImage[image]
	if containerName != "" {
		b = r.behavior(pod, containerName, image)
	}
	if b.PullError != "" {
		return "", errors.New(b.PullError)
	}
	id := imageID(image)
	r.images[image] = id
	r.pulledAt[image] = r.clock.Now()
	return id, nil
}

// createSandbox adds a ready sandbox and returns its ID.
func (r *Runtime) createSandbox(p *podState, pod *v1.Pod, attempt uint32) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.newID()
	s := &sandbox{
		id:          fmt.Sprintf("sandbox%d", n),
		state:       runtime.SandboxStateReady,
		attempt:     attempt,
		createdAt:   r.clock.Now(),
		hostNetwork: pod.Spec.HostNetwork,
	}
	if !pod.Spec.HostNetwork {
		s.ips = r.sandboxIPs(n)
	}
	p.sandboxes = append(p.sandboxes, s)
	return s.id
}

// purgeInitContainers forgets the init containers of a pod whose sandbox is
// being recreated, so that initialization starts over.
func (r *Runtime) purgeInitContainers(p *podState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.containers = slices.DeleteFunc(p.containers, func(c *container) bool {
		purge := (c.kind == kindInit || c.kind == kindSidecar) && !c.running()
		if purge {
			r.emit(p, c, runtime.ContainerDeletedEvent)
		}
		return purge
	})
}

// KillPod stops the containers and sandboxes of runningPod, matched by ID;
// IDs the runtime does not know are skipped. Each container gets
// runtime.EffectiveGracePeriod(pod, gracePeriodOverride), recorded in Kills;
// regular containers stop before sidecars. A container that ignores TERM
// makes KillPod wait its grace period on the clock.
func (r *Runtime) KillPod(ctx context.Context, pod *v1.Pod, runningPod runtime.Pod, gracePeriodOverride *int64) error {
	uid := runningPod.ID
	if uid == "" && pod != nil {
		uid = pod.UID
	}
	if err := r.enter(ctx, mKillPod, uid); err != nil {
		return err
	}
	r.mu.Lock()
	p, ok := r.pods[uid]
	if !ok {
		r.mu.Unlock()
		return nil
	}
	p.killed = true
	var ctrs []*container
	for _, rc := range runningPod.Containers {
		if c := p.byID(rc.ID); c != nil {
			ctrs = append(ctrs, c)
		}
	}
	var sbs []*sandbox
	for _, rs := range runningPod.Sandboxes {
		if s := p.sandbox(rs.ID.ID); s != nil {
			sbs = append(sbs, s)
		}
	}
	r.mu.Unlock()
	res := r.killPod(ctx, pod, p, ctrs, sbs, gracePeriodOverride)
	return res.Error()
}

// killPod stops ctrs, regular ones before sidecars in reverse order, then
// the sandboxes, which takes down whatever still runs in them.
func (r *Runtime) killPod(ctx context.Context, pod *v1.Pod, p *podState, ctrs []*container, sbs []*sandbox, override *int64) (result runtime.PodSyncResult) {
	grace := runtime.EffectiveGracePeriod(pod, override)
	r.mu.Lock()
	ordered := make([]*container, 0, len(ctrs))
	for _, c := range ctrs {
		if c.kind != kindSidecar && c.kind != kindInit {
			ordered = append(ordered, c)
		}
	}
	for i := len(ctrs) - 1; i >= 0; i-- {
		if c := ctrs[i]; c.kind == kindSidecar || c.kind == kindInit {
			ordered = append(ordered, c)
		}
	}
	names := make([]string, len(ordered))
	for i, c := range ordered {
		names[i] = c.name
	}
	r.mu.Unlock()

	msgs := make([]string, len(ordered))
	for i := range msgs {
		msgs[i] = runtime.KillMessage(ctx)
	}
	errs := r.stopContainers(ctx, pod, p, ordered, msgs, grace)
	for i, err := range errs {
		step := result.NewStep(runtime.KillContainer, names[i])
		if err != nil {
			step.Fail(fmt.Errorf("%w: %w", runtime.ErrKillContainer, err), "")
		}
	}
	if len(sbs) == 0 {
		return result
	}
	step := result.NewStep(runtime.KillPodSandbox, string(p.uid))
	if err := ctx.Err(); err != nil {
		step.Fail(fmt.Errorf("%w: %w", runtime.ErrKillPodSandbox, err), "")
		return result
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	for _, s := range sbs {
		s.state = runtime.SandboxStateNotReady
		for _, c := range p.containers {
			if c.sandboxID == s.id && c.running() {
				r.settle(p, now)
				if c.running() {
					r.stop(p, c, now, 137, "Error")
				}
			}
		}
	}
	return result
}

// stopContainers records each container's Killing event (msgs[i], default
// "Stopping container <name>") and runs its preStop hook, then sends TERM
// to each and stops it; containers that ignore TERM are killed when what
// is left of their grace period has passed on the clock. It returns one
// error per container.
func (r *Runtime) stopContainers(ctx context.Context, pod *v1.Pod, p *podState, ctrs []*container, msgs []string, grace int64) []error {
	uid := p.uid
	errs := make([]error, len(ctrs))
	graces := r.preStop(ctx, pod, p, ctrs, msgs, grace)
	type stubborn struct {
		c     *container
		kill  int // index into r.kills
		i     int // index into ctrs
		grace int64
	}
	var waiting []stubborn
	for i, c := range ctrs {
		if err := r.enter(ctx, mStopContainer, uid); err != nil {
			errs[i] = err
			continue
		}
		r.mu.Lock()
		now := r.clock.Now()
		if c.settle(now) {
			r.emit(p, c, runtime.ContainerStoppedEvent)
		}
		if c.running() {
			r.kills = append(r.kills, Kill{PodUID: uid, Name: c.name, ID: c.id, GracePeriod: graces[i], Time: now})
			if c.ignoreTERM && c.state == runtime.ContainerStateRunning {
				waiting = append(waiting, stubborn{c, len(r.kills) - 1, i, graces[i]})
			} else {
				r.stop(p, c, now, c.termExitCode, "")
			}
		}
		r.mu.Unlock()
	}
	// Those that ignore TERM, by when their grace period ends.
	slices.SortStableFunc(waiting, func(a, b stubborn) int { return cmp.Compare(a.grace, b.grace) })
	var waited int64
	for len(waiting) > 0 {
		g := waiting[0].grace
		if err := r.wait(ctx, time.Duration(g-waited)*time.Second); err != nil {
			for _, w := range waiting {
				errs[w.i] = err
			}
			return errs
		}
		waited = g
		r.mu.Lock()
		now := r.clock.Now()
		for len(waiting) > 0 && waiting[0].grace == g {
			w := waiting[0]
			waiting = waiting[1:]
			if w.c.settle(now) {
				r.emit(p, w.c, runtime.ContainerStoppedEvent)
			}
			if !w.c.running() {
				continue // exited on its own meanwhile
			}
			r.stop(p, w.c, now, 137, "Error")
			if w.kill < len(r.kills) && r.kills[w.kill].ID == w.c.id {
				r.kills[w.kill].Forced = true
			}
		}
		r.mu.Unlock()
	}
	return errs
}
