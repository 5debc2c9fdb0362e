package status

import (
	"net"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// Waiting reasons the generator sets, as in the kubelet (and
// runtime.ReasonContainerCreating for a container not yet started).
const (
	PodInitializing = "PodInitializing"
	// ContainerStatusUnknown marks a container the runtime lost track of.
	ContainerStatusUnknown = "ContainerStatusUnknown"
)

const (
	lostMessageTerminated = "The container could not be located when the pod was terminated"
	lostMessageDeleted    = "The container could not be located when the pod was deleted.  The container used to be Running"
	// lostExitCode is what a lost container is reported to have exited with.
	lostExitCode = 137
)

// GenerateOptions carries what GeneratePodStatus needs besides the pod and
// the runtime's view of it.
type GenerateOptions struct {
	// Reasons tells why containers last failed to start; nil means no
	// reasons are known (containers then wait without a reason).
	Reasons *ReasonCache
	// BackOff is the runtime's crash-loop back-off (the one the agent
	// passes to Runtime.SyncPod). With it, a container that the sync about
	// to run will not restart, because its last exit is still backing off
	// (runtime.InCrashLoopBackOff), waits with reason CrashLoopBackOff and
	// the runtime's message when Reasons does not say otherwise: the sync
	// that finds it backing off writes the reason, where the kubelet's
	// reason cache alone has it written by a later sync (in the kubelet's
	// v1.37, whose retry comes when the back-off ends, often at the restart
	// itself). nil: Reasons only.
	BackOff *runtime.Backoff
	// HostIPs are the node's IPs, primary first. They fill HostIP and
	// HostIPs, and PodIP(s) of host-network pods; the family of the first
	// decides which of a pod's IPs is its PodIP. Empty leaves the host IPs
	// unset, and IPv4 is the primary family.
	HostIPs []string
	// PodIsTerminal says the pod worker is done with the pod: its
	// containers will not be restarted whatever the restart policy, so a pod
	// whose containers have all stopped is Succeeded or Failed.
	PodIsTerminal bool
	// Probes gives the prober's verdicts for containers with a startup or
	// readiness probe, as the kubelet's prober manager does when it
	// generates a status. nil: the verdicts are carried over from old.
	Probes ProbeResults
}

// ProbeResults are a prober's verdicts on container instances, by the API's
// ContainerID; prober.Manager satisfies it.
type ProbeResults interface {
	// Started reports whether the instance passed its startup probe.
	Started(podUID types.UID, name, containerID string) bool
	// Ready reports whether the instance passed its readiness probe.
	Ready(podUID types.UID, name, containerID string) bool
}

// GeneratePodStatus computes the API status of pod from the runtime's status
// of it, as the kubelet's generateAPIPodStatus does: phase, the conditions the
// agent owns (PodReadyToStartContainers, Initialized, Ready, ContainersReady,
// PodScheduled; others' conditions are kept from pod.Status), container
// statuses with state, last state, readiness, restart count, image and IDs,
// waiting reasons from opts.Reasons, pod and host IPs, and start time.
//
// old is the previous status of the pod, normally the status manager's
// (Manager.GetPodStatus); nil means pod.Status. A container with a
// readiness or startup probe is ready or started as opts.Probes says, or
// without Probes keeps the Ready or Started that old has for the same
// container ID (the prober sets them through the Manager); one without
// is ready and started while running. Transition times of conditions are
// left for the Manager to set. The result may share memory with old.
func GeneratePodStatus(pod *v1.Pod, rs *runtime.PodStatus, old *v1.PodStatus, opts GenerateOptions) v1.PodStatus {
	if pod == nil {
		return v1.PodStatus{}
	}
	if old == nil {
		old = &pod.Status
	}
	if rs == nil {
		rs = &runtime.PodStatus{}
	}
	var s v1.PodStatus

	s.PodIPs = sortPodIPs(rs.IPs, opts.HostIPs)
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	s.QOSClass = old.QOSClass
	if s.QOSClass == "" {
		s.QOSClass = podutil.QOSClass(pod)
	}

	g := generator{pod: pod, rs: rs, reasons: opts.Reasons, backOff: opts.BackOff, probes: opts.Probes, hasInit: len(pod.Spec.InitContainers) > 0}
	s.InitContainerStatuses = g.containerStatuses(old.InitContainerStatuses, pod.Spec.InitContainers, kindInit)
	s.ContainerStatuses = g.containerStatuses(old.ContainerStatuses, pod.Spec.Containers, kindRegular)
	if n := len(pod.Spec.EphemeralContainers); n > 0 {
		specs := make([]v1.Container, n)
		for i := range pod.Spec.EphemeralContainers {
			specs[i] = v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		}
		s.EphemeralContainerStatuses = g.containerStatuses(old.EphemeralContainerStatuses, specs, kindEphemeral)
	}

	s.Phase = getPhase(pod, s.InitContainerStatuses, s.ContainerStatuses, opts.PodIsTerminal, activeRegularContainerStarted(&pod.Spec, rs))
	// A terminal phase the manager or the apiserver already has is kept.
	if !isTerminalPhase(s.Phase) {
		switch {
		case isTerminalPhase(old.Phase):
			s.Phase = old.Phase
		case isTerminalPhase(pod.Status.Phase):
			s.Phase = pod.Status.Phase
		}
	}
	if isTerminalPhase(pod.Status.Phase) && s.Phase != pod.Status.Phase {
		s.Phase = pod.Status.Phase
	}
	if s.Phase == old.Phase {
		// The reason and message belong to the phase.
		s.Reason, s.Message = old.Reason, old.Message
		if s.Reason == "" {
			s.Reason = pod.Status.Reason
		}
		if s.Message == "" {
			s.Message = pod.Status.Message
		}
	}

	s.Conditions = make([]v1.PodCondition, 0, len(pod.Status.Conditions)+5)
	for _, c := range pod.Status.Conditions {
		if !ownedByAgent(c.Type) {
			s.Conditions = append(s.Conditions, c)
		}
	}
	if _, c := findCondition(old.Conditions, v1.DisruptionTarget); c != nil {
		s.Conditions = setCondition(s.Conditions, *c)
	}
	ready := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse}
	if sandboxReady(pod, rs) {
		ready.Status = v1.ConditionTrue
	}
	s.Conditions = append(s.Conditions, ready,
		initializedCondition(&pod.Spec, s.InitContainerStatuses, s.ContainerStatuses, s.Phase),
		podReadyCondition(&pod.Spec, s.Conditions, s.InitContainerStatuses, s.ContainerStatuses, s.Phase),
		containersReadyCondition(&pod.Spec, s.InitContainerStatuses, s.ContainerStatuses, s.Phase),
		v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue})

	if len(opts.HostIPs) > 0 {
		s.HostIP = opts.HostIPs[0]
		s.HostIPs = make([]v1.HostIP, len(opts.HostIPs))
		for i, ip := range opts.HostIPs {
			s.HostIPs[i].IP = ip
		}
		if pod.Spec.HostNetwork {
			if s.PodIP == "" {
				s.PodIP = opts.HostIPs[0]
				s.PodIPs = []v1.PodIP{{IP: s.PodIP}}
			}
			if len(opts.HostIPs) == 2 && len(s.PodIPs) == 1 && isIPv4(s.PodIPs[0].IP) != isIPv4(opts.HostIPs[1]) {
				s.PodIPs = append(s.PodIPs, v1.PodIP{IP: opts.HostIPs[1]})
			}
		}
	}

	switch {
	case old.StartTime != nil && !old.StartTime.IsZero():
		t := *old.StartTime
		s.StartTime = &t
	case pod.Status.StartTime != nil && !pod.Status.StartTime.IsZero():
		t := *pod.Status.StartTime
		s.StartTime = &t
	}
	return s
}

// sortPodIPs picks the pod's IPs as the kubelet's sortPodIPs does: the
// runtime may list any number in any order, the apiserver accepts at most one
// per family. The first IP of the node's primary family (IPv4 without node
// IPs) comes first, then the first of the other family.
func sortPodIPs(ips, nodeIPs []string) []v1.PodIP {
	ips = podutil.SortPodIPs(ips, nodeIPs)
	if len(ips) == 0 {
		return nil
	}
	out := make([]v1.PodIP, len(ips))
	for i, ip := range ips {
		out[i].IP = ip
	}
	return out
}

func isIPv4(ip string) bool {
	p := net.ParseIP(ip)
	return p != nil && p.To4() != nil
}

type containerKind int

const (
	kindRegular containerKind = iota
	kindInit
	kindEphemeral
)

type generator struct {
	pod     *v1.Pod
	rs      *runtime.PodStatus
	reasons *ReasonCache
	backOff *runtime.Backoff
	probes  ProbeResults
	hasInit bool
}

// containerStatuses converts the runtime's statuses of containers (one kind
// of the pod's containers) to API statuses, as the kubelet's
// convertToAPIContainerStatuses does, and sets Ready and Started.
func (g *generator) containerStatuses(prev []v1.ContainerStatus, containers []v1.Container, kind containerKind) []v1.ContainerStatus {
	if len(containers) == 0 {
		return nil
	}
	defaultReason := runtime.ReasonContainerCreating
	if g.hasInit {
		defaultReason = PodInitializing
	}
	out := make([]v1.ContainerStatus, len(containers))
	// One allocation for every default waiting state and Started flag.
	waits := make([]v1.ContainerStateWaiting, len(containers))
	started := make([]bool, len(containers))

	for i := range containers {
		c := &containers[i]
		waits[i].Reason = defaultReason
		st := v1.ContainerStatus{Name: c.Name, Image: c.Image, State: v1.ContainerState{Waiting: &waits[i]}}
		if old := findContainerStatus(prev, c.Name); old != nil {
			if old.State.Terminated != nil {
				st = *old
			} else {
				st.RestartCount = old.RestartCount
				st.LastTerminationState = old.LastTerminationState
			}
		}
		out[i] = st
	}

	for i := range containers {
		c := &containers[i]
		newest, previous := latestTwo(g.rs, c.Name)
		old := findContainerStatus(prev, c.Name)
		if newest == nil {
			// A container that was running and has vanished from the runtime
			// did stop, even though nobody saw its exit: say so rather than
			// showing it as never started.
			if old == nil || old.State.Terminated != nil || old.State.Running == nil {
				continue
			}
			st := &out[i]
			if st.State.Waiting == nil || st.State.Waiting.Reason != defaultReason || st.LastTerminationState.Terminated != nil {
				continue
			}
			st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{
				Reason: ContainerStatusUnknown, Message: lostMessageDeleted, ExitCode: lostExitCode,
			}
			if g.pod.DeletionTimestamp == nil {
				st.RestartCount++
			}
			continue
		}
		st := convertContainerStatus(newest, old)
		switch {
		case previous != nil:
			st.LastTerminationState = convertContainerStatus(previous, old).State
		case old != nil && old.ContainerID == st.ContainerID:
			// The previous instance was garbage collected; what we knew of
			// it for this same instance still holds.
			st.LastTerminationState = old.LastTerminationState
		}
		out[i] = st
	}

	if kind != kindEphemeral && (g.reasons != nil || g.backOff != nil) {
		for i := range containers {
			c := &containers[i]
			if kind == kindInit {
				// An init container that succeeded is never started again.
				if s := g.rs.FindContainerStatusByName(c.Name); s != nil && s.State == runtime.ContainerStateExited && s.ExitCode == 0 {
					continue
				}
			}
			if !shouldRestart(c, g.pod, g.rs) {
				continue
			}
			reason, msg, ok := g.reasons.Get(g.pod.UID, c.Name)
			if !ok {
				if msg, _, ok = runtime.InCrashLoopBackOff(g.backOff, g.pod, c, g.rs); !ok {
					continue
				}
				reason = runtime.ErrCrashLoopBackOff.Error()
			}
			st := &out[i]
			if st.State.Terminated != nil {
				st.LastTerminationState = st.State
			}
			waits[i] = v1.ContainerStateWaiting{Reason: reason, Message: msg}
			st.State = v1.ContainerState{Waiting: &waits[i]}
		}
	}

	if kind != kindEphemeral {
		for i := range containers {
			g.setProbeResults(&containers[i], &out[i], findContainerStatus(prev, containers[i].Name), kind, &started[i])
		}
	}
	if kind == kindRegular {
		slices.SortFunc(out, func(a, b v1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// setProbeResults sets Started and Ready as the kubelet's prober does. A
// probe's verdict is carried over from the old status of the same container
// instance; without the probe, running means started and ready.
func (g *generator) setProbeResults(c *v1.Container, st, old *v1.ContainerStatus, kind containerKind, started *bool) {
	sameInstance := old != nil && old.ContainerID != "" && old.ContainerID == st.ContainerID
	running := st.State.Running != nil
	switch {
	case !running || c.StartupProbe == nil:
		*started = running
	case g.probes != nil:
		*started = g.probes.Started(g.pod.UID, c.Name, st.ContainerID)
	default:
		*started = sameInstance && old.Started != nil && *old.Started
	}
	st.Started = started
	if kind == kindInit && !podutil.IsRestartableInitContainer(c) {
		st.Ready = st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
		return
	}
	switch {
	case !*started || c.ReadinessProbe == nil:
		st.Ready = *started
	case g.probes != nil:
		st.Ready = g.probes.Ready(g.pod.UID, c.Name, st.ContainerID)
	default:
		st.Ready = sameInstance && old.Ready
	}
}

// convertContainerStatus converts one container instance.
func convertContainerStatus(cs *runtime.ContainerStatus, old *v1.ContainerStatus) v1.ContainerStatus {
	cid := cs.ID.String()
	st := v1.ContainerStatus{
		Name:         cs.Name,
		RestartCount: int32(cs.RestartCount),
		Image:        cs.Image,
		ImageID:      cs.ImageID,
		ContainerID:  cid,
	}
	if old != nil {
		st.VolumeMounts = old.VolumeMounts
	}
	switch {
	case cs.State == runtime.ContainerStateRunning:
		st.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.StartedAt)}
	case cs.State == runtime.ContainerStateExited:
		st.State.Terminated = &v1.ContainerStateTerminated{
			ExitCode:    int32(cs.ExitCode),
			Reason:      cs.Reason,
			Message:     cs.Message,
			StartedAt:   metav1.NewTime(cs.StartedAt),
			FinishedAt:  metav1.NewTime(cs.FinishedAt),
			ContainerID: cid,
		}
	case cs.State == runtime.ContainerStateUnknown && old != nil && old.State.Running != nil:
		// It ran and the runtime lost it: it did not "never run", which
		// would let a run-once pod run twice.
		st.State.Terminated = &v1.ContainerStateTerminated{
			Reason: ContainerStatusUnknown, Message: lostMessageTerminated, ExitCode: lostExitCode,
		}
		st.RestartCount = old.RestartCount + 1
	default:
		// Created, or unknown without evidence that it ran.
		st.State.Waiting = &v1.ContainerStateWaiting{}
	}
	return st
}

// latestTwo returns the newest and the one before of the named container's
// instances.
func latestTwo(rs *runtime.PodStatus, name string) (newest, previous *runtime.ContainerStatus) {
	for _, cs := range rs.ContainerStatuses {
		if cs == nil || cs.Name != name {
			continue
		}
		switch {
		case newest == nil:
			newest = cs
		case cs.CreatedAt.After(newest.CreatedAt):
			newest, previous = cs, newest
		case previous == nil || cs.CreatedAt.After(previous.CreatedAt):
			previous = cs
		}
	}
	return newest, previous
}

// shouldRestart reports whether the runtime will start the container again,
// as the kubelet's ShouldContainerBeRestarted.
func shouldRestart(c *v1.Container, pod *v1.Pod, rs *runtime.PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	s := rs.FindContainerStatusByName(c.Name)
	if s == nil {
		return true
	}
	switch s.State {
	case runtime.ContainerStateRunning:
		return false
	case runtime.ContainerStateUnknown, runtime.ContainerStateCreated:
		return true
	}
	return podutil.ContainerShouldRestart(c, &pod.Spec, int32(s.ExitCode))
}

// activeRegularContainerStarted reports whether a regular container was
// created in the pod's current sandbox (any sandbox, for runtimes without
// sandboxes): then the pod has been initialized in this sandbox.
func activeRegularContainerStarted(spec *v1.PodSpec, rs *runtime.PodStatus) bool {
	var since *runtime.SandboxStatus
	for _, sb := range rs.SandboxStatuses {
		if sb != nil && (since == nil || sb.CreatedAt.After(since.CreatedAt)) {
			since = sb
		}
	}
	for _, cs := range rs.ContainerStatuses {
		if cs == nil || (since != nil && cs.CreatedAt.Before(since.CreatedAt)) {
			continue
		}
		for i := range spec.Containers {
			if spec.Containers[i].Name == cs.Name {
				return true
			}
		}
	}
	return false
}

// sandboxReady reports whether the pod has exactly one ready sandbox with
// its network set up, so containers can start without a new sandbox. A
// runtime without sandboxes is ready while any container runs.
func sandboxReady(pod *v1.Pod, rs *runtime.PodStatus) bool {
	if len(rs.SandboxStatuses) == 0 {
		for _, cs := range rs.ContainerStatuses {
			if cs != nil && cs.State == runtime.ContainerStateRunning {
				return true
			}
		}
		return false
	}
	n := 0
	for _, sb := range rs.SandboxStatuses {
		if sb != nil && sb.State == runtime.SandboxStateReady {
			n++
		}
	}
	sb := rs.SandboxStatuses[0]
	if n != 1 || sb == nil || sb.State != runtime.SandboxStateReady || sb.HostNetwork != pod.Spec.HostNetwork {
		return false
	}
	return pod.Spec.HostNetwork || len(sb.IPs) > 0
}

// getPhase computes the pod's phase from its container statuses, as the
// kubelet's getPhase: podIsTerminal means no container will start again,
// podHasInitialized that a regular container started in the current sandbox.
func getPhase(pod *v1.Pod, initStatuses, statuses []v1.ContainerStatus, podIsTerminal, podHasInitialized bool) v1.PodPhase {
	spec := &pod.Spec
	// failedInit and stoppedForGood count the containers that failed (init)
	// or stopped (regular) and that their restart policies and rules do not
	// start again (the kubelet's ContainerRestartRules, on by default).
	pendingInit, pendingSidecars, failedInit := 0, 0, 0
	unknown, running, waiting, stopped, stoppedForGood, succeeded := 0, 0, 0, 0, 0, 0
	forGood := func(c *v1.Container, exitCode int32) bool {
		return !podutil.ContainerShouldRestart(c, spec, exitCode)
	}

	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		s := findContainerStatus(initStatuses, c.Name)
		if podutil.IsRestartableInitContainer(c) {
			switch {
			case s == nil:
				unknown++
			case s.State.Running != nil:
				if s.Started == nil || !*s.Started {
					pendingSidecars++
				}
				running++
			case s.State.Terminated != nil:
				// A stopped sidecar does not count.
			case s.State.Waiting != nil:
				if s.LastTerminationState.Terminated == nil {
					pendingSidecars++
				}
			default:
				pendingSidecars++
				unknown++
			}
			continue
		}
		switch {
		case s == nil:
			pendingInit++
		case s.State.Running != nil:
			pendingInit++
		case s.State.Terminated != nil:
			if code := s.State.Terminated.ExitCode; code != 0 && forGood(c, code) {
				failedInit++
			}
		case s.State.Waiting != nil:
			if t := s.LastTerminationState.Terminated; t != nil {
				if t.ExitCode != 0 && forGood(c, t.ExitCode) {
					failedInit++
				}
			} else {
				pendingInit++
			}
		default:
			pendingInit++
		}
	}

	for i := range spec.Containers {
		c := &spec.Containers[i]
		s := findContainerStatus(statuses, c.Name)
		switch {
		case s == nil:
			unknown++
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if forGood(c, s.State.Terminated.ExitCode) {
				stoppedForGood++
			}
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case s.State.Waiting != nil:
			if t := s.LastTerminationState.Terminated; t != nil {
				stopped++
				if forGood(c, t.ExitCode) {
					stoppedForGood++
				}
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}

	if failedInit > 0 {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0 || (pendingSidecars > 0 && !podHasInitialized), waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		// A terminal pod's containers stay stopped whatever the policy; the
		// kubelet leaves static pods out of this (kubernetes#116484).
		if podIsTerminal && !podutil.IsStaticPod(pod) {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		if stopped != stoppedForGood {
			return v1.PodRunning // some are being restarted
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	default:
		return v1.PodPending
	}
}
