package cri

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/lifecycle"
)

func containerState(s runtimeapi.ContainerState) runtime.ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return runtime.ContainerStateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return runtime.ContainerStateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return runtime.ContainerStateExited
	}
	return runtime.ContainerStateUnknown
}

func (m *Manager) id(id string) runtime.ContainerID {
	return runtime.ContainerID{Type: m.name, ID: id}
}

// GetPods lists the pods that have sandboxes or containers with nodekit's
// (the kubelet's) labels: with all=false only ready sandboxes and running
// containers, with all=true everything. Two CRI calls.
func (m *Manager) GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error) {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	sbReq := &runtimeapi.ListPodSandboxRequest{}
	cReq := &runtimeapi.ListContainersRequest{}
	var opts []grpc.CallOption
	if all {
		opts = m.lists.callOptions()
	} else {
		sbReq.Filter = &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}
		cReq.Filter = &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	}
	sbs, err := m.rt.ListPodSandbox(ctx, sbReq, opts...)
	if err != nil {
		return nil, wrapErr("ListPodSandbox", err)
	}
	cs, err := m.rt.ListContainers(ctx, cReq, opts...)
	if err != nil {
		return nil, wrapErr("ListContainers", err)
	}
	if all {
		m.memo.listed(sbs.Items, cs.Containers)
	}
	pods := make(map[types.UID]*runtime.Pod)
	get := func(labels map[string]string) *runtime.Pod {
		uid := types.UID(labels[LabelPodUID])
		if uid == "" {
			return nil // not a kubelet-style object
		}
		p := pods[uid]
		if p == nil {
			p = &runtime.Pod{ID: uid, Name: labels[LabelPodName], Namespace: labels[LabelPodNamespace]}
			pods[uid] = p
		}
		return p
	}
	for _, sb := range sbs.Items {
		p := get(sb.Labels)
		if p == nil {
			continue
		}
		p.Sandboxes = append(p.Sandboxes, m.listedSandbox(sb))
		if uint64(sb.CreatedAt) > p.CreatedAt {
			p.CreatedAt = uint64(sb.CreatedAt)
		}
	}
	for _, c := range cs.Containers {
		p := get(c.Labels)
		if p == nil {
			continue
		}
		p.Containers = append(p.Containers, m.listedContainer(c))
	}
	out := make([]*runtime.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// listedSandbox is a listed sandbox as a runtime.Container: running if
// ready, else exited, with its attempt and creation time.
func (m *Manager) listedSandbox(sb *runtimeapi.PodSandbox) *runtime.Container {
	state := runtime.ContainerStateExited
	if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
		state = runtime.ContainerStateRunning
	}
	return &runtime.Container{ID: m.id(sb.Id), State: state, Attempt: sb.GetMetadata().GetAttempt(), CreatedAt: sb.CreatedAt}
}

// listedContainer is a listed container as a runtime.Container.
func (m *Manager) listedContainer(c *runtimeapi.Container) *runtime.Container {
	ci := readContainerInfo(c.Labels, c.Annotations)
	name := ci.name
	if name == "" {
		name = c.GetMetadata().GetName()
	}
	return &runtime.Container{
		ID: m.id(c.Id), Name: name, Image: c.GetImage().GetImage(), ImageID: c.ImageRef,
		Hash: ci.hash, State: containerState(c.State), SandboxID: c.PodSandboxId,
		Attempt: uint32(ci.restartCount), CreatedAt: c.CreatedAt,
	}
}

// createdStatus is the status of a container listed as created (not yet
// started): all a ContainerStatus call would say, the listing said.
func createdStatus(c *runtime.Container) *runtime.ContainerStatus {
	return &runtime.ContainerStatus{
		ID: c.ID, Name: c.Name, State: runtime.ContainerStateCreated, CreatedAt: unixTime(c.CreatedAt),
		Image: c.Image, ImageID: c.ImageID, Hash: c.Hash, RestartCount: int(c.Attempt),
	}
}

// GetPodStatus inspects one pod: its sandboxes newest first (the newest
// one's status asked for IPs and network mode) and every container instance,
// newest first, each with a ContainerStatus call.
func (m *Manager) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	now := m.clock.Now()
	sel := map[string]string{LabelPodUID: string(uid)}
	sbs, err := m.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: sel}})
	if err != nil {
		return nil, wrapErr("ListPodSandbox", err)
	}
	cs, err := m.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: sel}})
	if err != nil {
		return nil, wrapErr("ListContainers", err)
	}
	pod := &runtime.Pod{ID: uid, Name: name, Namespace: namespace}
	for _, sb := range sbs.Items {
		pod.Sandboxes = append(pod.Sandboxes, m.listedSandbox(sb))
	}
	for _, c := range cs.Containers {
		pod.Containers = append(pod.Containers, m.listedContainer(c))
	}
	return m.inspect(ctx, pod, now)
}

// GetPodStatusListed is GetPodStatus for a pod of GetPods(ctx, true): it
// asks for the statuses of the listed sandbox and containers without
// listing them again (two CRI calls fewer per inspection). A container
// created since the listing is not in the status; the next listing shows it.
func (m *Manager) GetPodStatusListed(ctx context.Context, pod *runtime.Pod) (*runtime.PodStatus, error) {
	if pod == nil {
		return nil, fmt.Errorf("cri GetPodStatusListed: nil pod: %w", runtime.ErrInvalidConfig)
	}
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	return m.inspect(ctx, pod, m.clock.Now())
}

// inspect builds the status of pod's listed sandboxes (newest first, the
// newest one's status asked for IPs and network mode) and containers (each
// one's status asked for).
func (m *Manager) inspect(ctx context.Context, pod *runtime.Pod, now time.Time) (*runtime.PodStatus, error) {
	st := &runtime.PodStatus{ID: pod.ID, Name: pod.Name, Namespace: pod.Namespace, TimeStamp: now}
	sbs := slices.Clone(pod.Sandboxes)
	slices.SortStableFunc(sbs, func(a, b *runtime.Container) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(b.Attempt, a.Attempt))
	})
	for i, sb := range sbs {
		ss := &runtime.SandboxStatus{
			ID:        sb.ID.ID,
			State:     runtime.SandboxStateNotReady,
			Attempt:   sb.Attempt,
			CreatedAt: time.Unix(0, sb.CreatedAt),
		}
		if sb.State == runtime.ContainerStateRunning {
			ss.State = runtime.SandboxStateReady
		}
		if i == 0 {
			ready := ss.State == runtime.SandboxStateReady
			e, ok := m.memo.sandbox(sb.ID.ID, ready)
			if !ok {
				var err error
				if e, ok, err = m.sandboxStatus(ctx, sb.ID.ID, ready); err != nil {
					return nil, err
				}
			}
			if ok {
				ss.HostNetwork = e.hostNetwork
				if ready && !e.hostNetwork {
					ss.IPs = slices.Clone(e.ips)
				}
			}
			st.IPs = ss.IPs
		}
		st.SandboxStatuses = append(st.SandboxStatuses, ss)
	}
	for _, c := range pod.Containers {
		cs, ok := m.memo.container(c.ID.ID, c.State)
		if !ok && c.State == runtime.ContainerStateCreated {
			cs, ok = createdStatus(c), true
		}
		if !ok {
			resp, err := m.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ID.ID})
			if err != nil {
				if errors.Is(wrapErr("", err), runtime.ErrNotFound) {
					continue // removed since the list
				}
				return nil, wrapErr("ContainerStatus", err)
			}
			if err := verifyContainerStatus(resp.GetStatus()); err != nil {
				return nil, fmt.Errorf("cri: ContainerStatus of %q: %w", c.ID.ID, err)
			}
			cs = m.containerStatus(resp.GetStatus())
			m.memo.putContainer(c.ID.ID, c.State, cs)
		}
		cs.SandboxID = c.SandboxID
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	sortNewestFirst(st.ContainerStatuses)
	return st, nil
}

// sandboxStatus asks for sandbox id's network and namespaces, listed ready
// or not, and remembers them; ok is false if the sandbox is gone since the
// listing.
func (m *Manager) sandboxStatus(ctx context.Context, id string, ready bool) (e memoSandbox, ok bool, err error) {
	resp, err := m.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	switch {
	case err == nil:
	case errors.Is(wrapErr("", err), runtime.ErrNotFound):
		return e, false, nil // removed since the list; keep what the list said
	default:
		return e, false, wrapErr("PodSandboxStatus", err)
	}
	s := resp.GetStatus()
	if err := verifySandboxStatus(s); err != nil {
		return e, false, fmt.Errorf("cri: PodSandboxStatus of %q: %w", id, err)
	}
	e.ready = ready
	e.hostNetwork = s.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
	if ip := s.GetNetwork().GetIp(); ip != "" {
		e.ips = append(e.ips, ip)
		for _, a := range s.GetNetwork().GetAdditionalIps() {
			e.ips = append(e.ips, a.Ip)
		}
	}
	m.memo.putSandbox(id, e)
	return e, true, nil
}

func sortNewestFirst(cs []*runtime.ContainerStatus) {
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		if a.RestartCount != b.RestartCount {
			return a.RestartCount > b.RestartCount // same clock tick: the later instance counts higher
		}
		return a.ID.ID < b.ID.ID // an order that does not depend on the runtime's listing
	})
}

func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func (m *Manager) containerStatus(s *runtimeapi.ContainerStatus) *runtime.ContainerStatus {
	ci := readContainerInfo(s.Labels, s.Annotations)
	name := ci.name
	if name == "" {
		name = s.GetMetadata().GetName()
	}
	cs := &runtime.ContainerStatus{
		ID:           m.id(s.Id),
		Name:         name,
		State:        containerState(s.State),
		CreatedAt:    unixTime(s.CreatedAt),
		StartedAt:    unixTime(s.StartedAt),
		FinishedAt:   unixTime(s.FinishedAt),
		ExitCode:     int(s.ExitCode),
		Reason:       s.Reason,
		Message:      s.Message,
		Image:        s.GetImage().GetImage(),
		ImageID:      s.ImageRef,
		Hash:         ci.hash,
		RestartCount: ci.restartCount,
	}
	if s.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		if msg := terminationMessage(s, ci); msg != "" {
			if cs.Message != "" {
				cs.Message += ": "
			}
			cs.Message += msg
		}
	}
	return cs
}

// KillPod stops runningPod's containers in parallel, each with the effective
// grace period, then its sandboxes. For an orphan (pod nil) the grace period
// comes from the container's annotations. Stopped containers and sandboxes
// stay until RemovePod or the runtime's garbage collection; the pod's cgroup
// (Config.PodCgroups) is removed.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, runningPod runtime.Pod, gracePeriodOverride *int64) error {
	uid := runningPod.ID
	if pod != nil {
		uid = pod.UID
	}
	m.markKilled(uid)
	res := m.killPod(ctx, pod, runningPod, gracePeriodOverride)
	pc := m.cgroups()
	if err := res.Error(); err != nil || pc == nil {
		return err
	}
	// Nothing of the pod runs any more: its cgroup goes, as in the
	// kubelet's SyncTerminatedPod.
	return pc.DestroyPod(uid)
}

// KillContainer stops one container of pod (its preStop hook, then
// StopContainer within the effective grace period) and leaves the rest of
// the pod running: unlike KillPod it neither marks the pod for garbage
// collection nor removes its cgroup, which would take the sandbox with it.
// It makes the Manager a runtime.ContainerKiller.
func (m *Manager) KillContainer(ctx context.Context, pod *v1.Pod, c runtime.Container, gracePeriodOverride *int64) error {
	if pod == nil {
		return fmt.Errorf("cri KillContainer %q: nil pod: %w", c.Name, runtime.ErrInvalidConfig)
	}
	if err := m.killContainer(ctx, pod, c.ID, c.Name, runtime.KillMessage(ctx), gracePeriodOverride, nil); err != nil {
		return fmt.Errorf("%w: %w", runtime.ErrKillContainer, err)
	}
	return nil
}

func (m *Manager) killPod(ctx context.Context, pod *v1.Pod, runningPod runtime.Pod, override *int64) runtime.PodSyncResult {
	var res runtime.PodSyncResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	msg := runtime.KillMessage(ctx)
	names := make([]string, len(runningPod.Containers))
	for i, c := range runningPod.Containers {
		names[i] = c.Name
	}
	// Sidecars stop after the containers they serve, as the kubelet's.
	order := lifecycle.NewOrdering(pod, names, m.clock)
	for _, c := range runningPod.Containers {
		step := res.NewStep(runtime.KillContainer, c.Name)
		wg.Go(func() {
			if err := m.killContainer(ctx, pod, c.ID, c.Name, msg, override, order); err != nil {
				mu.Lock()
				step.Fail(fmt.Errorf("%w: %w", runtime.ErrKillContainer, err), err.Error())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if res.Error() != nil {
		return res // the kubelet does not stop the sandbox under live containers
	}
	for _, sb := range runningPod.Sandboxes {
		step := res.NewStep(runtime.KillPodSandbox, string(runningPod.ID))
		if err := m.stopSandbox(ctx, sb.ID.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			step.Fail(fmt.Errorf("%w: %w", runtime.ErrKillPodSandbox, err), err.Error())
		}
	}
	return res
}

// killContainer stops one container as the kubelet's killContainer: a
// Killing event (message, default "Stopping container <name>"), its
// preStop hook within the grace period, its turn after the containers it
// serves (order, nil for none), then StopContainer with what is left of
// the grace period. For an orphan (pod nil) the grace period and the
// preStop hook come from the container's annotations, and no event is
// recorded.
func (m *Manager) killContainer(ctx context.Context, pod *v1.Pod, id runtime.ContainerID, name, message string, override *int64, order *lifecycle.Ordering) error {
	var spec *v1.Container
	hookPod := pod
	if pod != nil {
		spec = podContainer(pod, name)
	} else {
		hookPod, spec = m.specFromAnnotations(ctx, id)
	}
	grace := runtime.EffectiveGracePeriod(hookPod, override)
	if message == "" {
		message = "Stopping container " + name
	}
	m.recordContainer(pod, name, id.ID, v1.EventTypeNormal, runtime.EventKilling, "%s", message)
	if spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil {
		left, failed, msg := m.hooks.PreStop(ctx, id, hookPod, spec, grace)
		if failed {
			m.log.Info("PreStop hook failed", "pod", hookPod.Namespace+"/"+hookPod.Name, "container", name, "message", msg)
			// As the kubelet: not the message, which may hold secrets.
			m.recordContainer(pod, name, id.ID, v1.EventTypeWarning, runtime.EventFailedPreStopHook, "PreStopHook failed")
		}
		grace = left
	}
	if waited := order.WaitForTurn(ctx, name, grace); waited > 0 {
		grace = max(grace-int64(waited/time.Second), lifecycle.MinGracePeriod)
	}
	if err := m.stopContainer(ctx, id.ID, grace); err != nil {
		return err
	}
	order.Terminated(name)
	return nil
}

// podContainer is the spec of pod's container (of any kind) named name.
func podContainer(pod *v1.Pod, name string) *v1.Container {
	var found *v1.Container
	forEachContainer(pod, func(c *v1.Container, _ string) bool {
		if c.Name == name {
			found = c
			return false
		}
		return true
	})
	return found
}

// specFromAnnotations restores what killing an orphan's container needs
// from its labels and annotations, as the kubelet's
// restoreSpecsFromContainerLabels: the pod's grace periods and identity,
// the container's name, ports and preStop hook. Both are nil when the
// runtime does not answer.
func (m *Manager) specFromAnnotations(ctx context.Context, id runtime.ContainerID) (*v1.Pod, *v1.Container) {
	cctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	resp, err := m.rt.ContainerStatus(cctx, &runtimeapi.ContainerStatusRequest{ContainerId: id.ID})
	if err != nil {
		return nil, nil
	}
	ci := readContainerInfo(resp.GetStatus().GetLabels(), resp.GetStatus().GetAnnotations())
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = ci.podName, ci.podNamespace, ci.podUID
	pod.Spec.TerminationGracePeriodSeconds = ci.terminationGrace
	if ci.deletionGrace != nil {
		pod.DeletionGracePeriodSeconds = ci.deletionGrace
		now := metaNow(m)
		pod.DeletionTimestamp = &now
	}
	c := &v1.Container{Name: ci.name, Ports: ci.ports}
	if ci.preStop != nil {
		c.Lifecycle = &v1.Lifecycle{PreStop: ci.preStop}
	}
	return pod, c
}

// RemovePod removes every container and sandbox of the pod with uid, which
// must have been killed, with its log directory and its state under
// PodsRoot. It is how a caller cleans up a deleted pod without waiting for
// garbage collection.
func (m *Manager) RemovePod(ctx context.Context, uid types.UID) error {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	sel := map[string]string{LabelPodUID: string(uid)}
	cs, err := m.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: sel}})
	if err != nil {
		return wrapErr("ListContainers", err)
	}
	var errs []error
	for _, c := range cs.Containers {
		if _, err := m.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.Id}); err != nil {
			errs = append(errs, wrapErr("RemoveContainer", err))
		}
	}
	sbs, err := m.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: sel}})
	if err != nil {
		return errors.Join(append(errs, wrapErr("ListPodSandbox", err))...)
	}
	for _, sb := range sbs.Items {
		if _, err := m.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, wrapErr("RemovePodSandbox", err))
		}
	}
	if len(errs) == 0 && len(sbs.Items) > 0 {
		md := sbs.Items[0].Metadata
		errs = append(errs, m.removePodDirs(uid, md.GetName(), md.GetNamespace()))
	}
	m.forgetKilled(uid)
	return errors.Join(errs...)
}

func sortSandboxesNewestFirst(items []*runtimeapi.PodSandbox) {
	sort.Slice(items, func(i, j int) bool {
		if items[i].CreatedAt != items[j].CreatedAt {
			return items[i].CreatedAt > items[j].CreatedAt
		}
		return items[i].GetMetadata().GetAttempt() > items[j].GetMetadata().GetAttempt()
	})
}
