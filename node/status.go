package node

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	goruntime "runtime"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// The Ready condition's reasons and message, the kubelet's.
const (
	ReasonReady    = "KubeletReady"
	ReasonNotReady = "KubeletNotReady"
	MessageReady   = "kubelet is posting ready status"
)

// maxNamesPerImage is the kubelet's MaxNamesPerImageInNodeStatus.
const maxNamesPerImage = 5

// computeStatus returns the status the node should have, given the last
// one known (old, not modified): the fields the controller owns are
// replaced, the rest (volumes, config, conditions of others) kept. Maps
// and slices not owned may be shared with old.
func (c *Controller) computeStatus(ctx context.Context, old *v1.NodeStatus, now time.Time) *v1.NodeStatus {
	st := *old
	provided := c.setMachineStatus(ctx, &st, old)

	// The kubelet's order: the runtime's state and health checks, the
	// runtime's readiness, the network's, then missing capacity.
	var notReady []string
	if rt := c.cfg.Runtime; rt != nil {
		notReady = c.runtimeState(ctx, rt, &st, old, notReady)
	} else {
		notReady = c.healthErrors(notReady)
	}
	if p := c.cfg.Provider; p != nil {
		cctx, cancel := c.callCtx(ctx)
		err := p.Ping(cctx)
		cancel()
		if err != nil {
			notReady = append(notReady, fmt.Sprintf("node provider is not healthy: %v", err))
		}
	}
	c.runSetters(ctx, &st)
	// The kubelet requires ephemeral-storage too (LocalStorageCapacityIsolation
	// is on); a provider's capacity is its own, as under virtual-kubelet.
	required := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage}
	if c.cfg.Virtual || provided != nil && len(provided.Status.Capacity) > 0 {
		required = required[:3]
	}
	var missing []string
	for _, r := range required {
		if _, ok := st.Capacity[r]; !ok {
			missing = append(missing, string(r))
		}
	}
	if len(missing) > 0 {
		notReady = append(notReady, "missing node capacity for resources: "+strings.Join(missing, ", "))
	}

	// Conditions: the others' kept in place, ours updated or appended in
	// the kubelet's order (Ready last), the provider's over ours.
	conds := make([]v1.NodeCondition, len(old.Conditions), len(old.Conditions)+4)
	copy(conds, old.Conditions)
	var pressure [3]bool
	if ps := c.cfg.Pressure; ps != nil {
		pressure = [3]bool{ps.MemoryPressure(), ps.DiskPressure(), ps.PIDPressure()}
	}
	t := metav1.NewTime(now)
	conds = setPressure(conds, v1.NodeMemoryPressure, pressure[0], t,
		"KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
		"KubeletHasSufficientMemory", "kubelet has sufficient memory available")
	conds = setPressure(conds, v1.NodeDiskPressure, pressure[1], t,
		"KubeletHasDiskPressure", "kubelet has disk pressure",
		"KubeletHasNoDiskPressure", "kubelet has no disk pressure")
	conds = setPressure(conds, v1.NodePIDPressure, pressure[2], t,
		"KubeletHasInsufficientPID", "kubelet has insufficient PID available",
		"KubeletHasSufficientPID", "kubelet has sufficient PID available")
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: ReasonReady, Message: MessageReady}
	if len(notReady) > 0 {
		ready.Status, ready.Reason, ready.Message = v1.ConditionFalse, ReasonNotReady, joinErrors(notReady)
	}
	conds = setCondition(conds, ready, t)
	if provided != nil {
		for _, pc := range provided.Status.Conditions {
			conds = setCondition(conds, pc, t)
		}
	}
	st.Conditions = conds
	return &st
}

// setMachineStatus sets the fields of st the controller owns that take no
// runtime call: capacity and allocatable (the provider's over the
// controller's, others' extended resources of old kept), addresses, the
// daemon endpoint, nodeInfo but the runtime version (unless configured or
// provided) and the phase. What the provider's last node sets
// (NotifyNodeStatus) replaces the controller's, as virtual-kubelet sends
// its provider's status: a non-empty capacity, allocatable, address list
// or image list, a non-zero kubelet port, each non-empty nodeInfo field
// and a phase. It returns the provider's last node, or nil.
func (c *Controller) setMachineStatus(ctx context.Context, st, old *v1.NodeStatus) *v1.Node {
	st.Addresses = c.addresses
	st.DaemonEndpoints.KubeletEndpoint.Port = c.cfg.KubeletPort
	info := v1.NodeSystemInfo{
		OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH, KubeletVersion: c.cfg.KubeletVersion,
		Swap: old.NodeInfo.Swap, RunningInUserNamespace: old.NodeInfo.RunningInUserNamespace,
	}
	m, err := c.cfg.Machine.MachineInfo(ctx)
	if err != nil {
		// As the kubelet: cpu and memory 0, the machine's identity as it was.
		c.cfg.Log.Error(err, "Error getting machine info")
		st.Capacity = v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(0, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(0, resource.BinarySI),
			v1.ResourcePods:   *resource.NewQuantity(int64(c.cfg.MaxPods), resource.DecimalSI),
		}
		if q, ok := old.Capacity[v1.ResourceEphemeralStorage]; ok {
			st.Capacity[v1.ResourceEphemeralStorage] = q
		}
		info.MachineID, info.SystemUUID, info.BootID = old.NodeInfo.MachineID, old.NodeInfo.SystemUUID, old.NodeInfo.BootID
		info.KernelVersion, info.OSImage = old.NodeInfo.KernelVersion, old.NodeInfo.OSImage
		maps.Copy(st.Capacity, c.cfg.Capacity)
		st.Allocatable = c.allocatable(st.Capacity)
		maps.Copy(st.Allocatable, c.cfg.Allocatable)
	} else {
		st.Capacity, st.Allocatable = c.machineResources(m)
		info.MachineID, info.SystemUUID, info.BootID = m.MachineID, m.SystemUUID, m.BootID
		info.KernelVersion, info.OSImage = m.KernelVersion, m.OSImage
	}
	switch {
	case c.cfg.NodeInfo != nil: // the configured identity, not the machine's
		ni := *c.cfg.NodeInfo
		ni.Swap, ni.RunningInUserNamespace = info.Swap, info.RunningInUserNamespace
		if ni.KubeletVersion == "" {
			ni.KubeletVersion = c.cfg.KubeletVersion
		}
		info = ni
	case c.cfg.Virtual: // nothing of the host
		info = v1.NodeSystemInfo{KubeletVersion: c.cfg.KubeletVersion, Swap: info.Swap, RunningInUserNamespace: info.RunningInUserNamespace}
	}
	st.NodeInfo = info
	if c.cfg.Phase != "" {
		st.Phase = c.cfg.Phase
	}

	c.mu.Lock()
	provided := c.provided
	c.mu.Unlock()
	if provided != nil {
		if len(provided.Status.Capacity) > 0 {
			st.Capacity = provided.Status.Capacity
		}
		if len(provided.Status.Allocatable) > 0 {
			st.Allocatable = provided.Status.Allocatable
		}
		if len(provided.Status.Addresses) > 0 {
			st.Addresses = provided.Status.Addresses
		}
		if len(provided.Status.Images) > 0 {
			st.Images = provided.Status.Images
		}
		if p := provided.Status.DaemonEndpoints.KubeletEndpoint.Port; p != 0 {
			st.DaemonEndpoints.KubeletEndpoint.Port = p
		}
		overlayNodeInfo(&st.NodeInfo, &provided.Status.NodeInfo)
		if provided.Status.Phase != "" {
			st.Phase = provided.Status.Phase
		}
	}
	st.Capacity, st.Allocatable = keepExtendedResources(old.Capacity, st.Capacity, st.Allocatable)
	return provided
}

// overlayNodeInfo sets each field of info that p sets.
func overlayNodeInfo(info, p *v1.NodeSystemInfo) {
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&info.MachineID, p.MachineID}, {&info.SystemUUID, p.SystemUUID}, {&info.BootID, p.BootID},
		{&info.KernelVersion, p.KernelVersion}, {&info.OSImage, p.OSImage},
		{&info.ContainerRuntimeVersion, p.ContainerRuntimeVersion}, {&info.KubeletVersion, p.KubeletVersion},
		{&info.OperatingSystem, p.OperatingSystem}, {&info.Architecture, p.Architecture},
	} {
		if f.src != "" {
			*f.dst = f.src
		}
	}
	if p.Swap != nil {
		info.Swap = p.Swap
	}
}

// runSetters runs the Setters on st, never two runs at once (the status
// loop's and InitialNode's).
func (c *Controller) runSetters(ctx context.Context, st *v1.NodeStatus) {
	if len(c.cfg.Setters) == 0 {
		return
	}
	c.settersMu.Lock()
	defer c.settersMu.Unlock()
	for _, s := range c.cfg.Setters {
		if err := s(ctx, st); err != nil {
			c.cfg.Log.Error(err, "Node status setter failed")
		}
	}
}

// keepExtendedResources returns capacity and allocatable with the extended
// resources of old (the Node's capacity) that capacity lacks added, each
// allocatable as its capacity: a cluster operator advertises such a
// resource by patching the Node's status, and the kubelet, which updates
// the capacity it finds rather than replacing it, keeps it. capacity and
// allocatable are not modified; they are returned as they are when nothing
// is added.
func keepExtendedResources(old, capacity, allocatable v1.ResourceList) (v1.ResourceList, v1.ResourceList) {
	cloned := false
	for name, q := range old {
		if _, ok := capacity[name]; ok || !podutil.IsExtendedResourceName(name) {
			continue
		}
		if !cloned {
			capacity, allocatable = maps.Clone(capacity), maps.Clone(allocatable)
			if capacity == nil {
				capacity = v1.ResourceList{}
			}
			if allocatable == nil {
				allocatable = v1.ResourceList{}
			}
			cloned = true
		}
		capacity[name] = q.DeepCopy()
		allocatable[name] = q.DeepCopy()
	}
	return capacity, allocatable
}

// joinErrors formats messages as utilerrors.NewAggregate does: one as it
// is, several in brackets.
func joinErrors(msgs []string) string {
	if len(msgs) == 1 {
		return msgs[0]
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}

// healthErrors adds the failing health checks to notReady, in the
// kubelet's words.
func (c *Controller) healthErrors(notReady []string) []string {
	for _, h := range c.cfg.HealthChecks {
		if err := h.Check(); err != nil {
			notReady = append(notReady, fmt.Sprintf("%s is not healthy: %v", h.Name, err))
		}
	}
	return notReady
}

// runtimeState adds the runtime's version and images to st and its
// readiness problems to notReady, in the kubelet's words.
func (c *Controller) runtimeState(ctx context.Context, rt runtime.Runtime, st *v1.NodeStatus, old *v1.NodeStatus, notReady []string) []string {
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	// A failed call leaves the last answer standing (runtimestate.State).
	rs, err := rt.Status(cctx)
	if err != nil {
		c.cfg.Log.V(2).Info("Container runtime status check failed", "err", err)
	}
	now := c.cfg.Clock.Now()
	c.runtime.Observe(rs, err, now)
	switch {
	case c.runtime.NeverReady():
		notReady = append(notReady, "container runtime status check may not have completed yet")
	case c.runtime.Down(now):
		notReady = append(notReady, "container runtime is down")
	}
	notReady = c.healthErrors(notReady)
	if rs := c.runtime.Last(); rs != nil {
		if rc := rs.Condition(runtime.RuntimeReady); rc == nil || !rc.Status {
			notReady = append(notReady, "container runtime not ready: "+conditionString(runtime.RuntimeReady, rc))
		}
		if nc := rs.Condition(runtime.NetworkReady); nc == nil || !nc.Status {
			notReady = append(notReady, "container runtime network not ready: "+conditionString(runtime.NetworkReady, nc))
		}
	} else {
		// The kubelet's runtime state starts with this network error, until
		// the runtime first answers.
		notReady = append(notReady, "network state unknown")
	}
	// A runtime version configured (NodeInfo) or provided stands.
	if st.NodeInfo.ContainerRuntimeVersion == "" {
		st.NodeInfo.ContainerRuntimeVersion = old.NodeInfo.ContainerRuntimeVersion
		if v, err := rt.Version(cctx); err == nil {
			st.NodeInfo.ContainerRuntimeVersion = runtimeVersion(old.NodeInfo.ContainerRuntimeVersion, rt.Type(), v)
		}
	}
	if is, ok := rt.(runtime.ImageService); ok {
		if c.cfg.NoImages {
			st.Images = nil
		} else if imgs, ok := c.cachedImages(cctx, is, now); ok {
			st.Images = imageList(imgs, old.Images, c.cfg.MaxImages)
		}
	}
	return notReady
}

// cachedImages is the runtime's image list, read again when
// ImageRefreshPeriod passed since the last read, as the kubelet's image
// manager caches it; false until a read succeeded. A failed read keeps
// the last list. The list is read in the status loop rather than by a
// goroutine of its own (the kubelet's), so that on a fake clock the
// status a computation sends does not depend on goroutine order.
func (c *Controller) cachedImages(ctx context.Context, is runtime.ImageService, now time.Time) ([]runtime.Image, bool) {
	if c.imagesAt.IsZero() || now.Sub(c.imagesAt) >= c.cfg.ImageRefreshPeriod {
		imgs, err := is.ListImages(ctx)
		if err != nil {
			c.cfg.Log.V(2).Info("Failed to update image list", "err", err)
		} else {
			c.images, c.imagesAt = imgs, now
		}
	}
	return c.images, !c.imagesAt.IsZero()
}

// runtimeVersion is "type://version", reusing old's string when equal.
func runtimeVersion(old, typ, v string) string {
	if len(old) == len(typ)+3+len(v) && strings.HasPrefix(old, typ) && strings.HasSuffix(old, v) && old[len(typ):len(typ)+3] == "://" {
		return old
	}
	return typ + "://" + v
}

// conditionString is the kubelet's RuntimeCondition.String, or "nil".
func conditionString(t runtime.RuntimeConditionType, rc *runtime.RuntimeCondition) string {
	if rc == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s=%t reason:%s message:%s", t, rc.Status, rc.Reason, rc.Message)
}

// imageList is the node's images, largest first, at most max (all if max
// is negative), each with up to five names; old's slice when nothing
// changed.
func imageList(imgs []runtime.Image, old []v1.ContainerImage, max int) []v1.ContainerImage {
	slices.SortFunc(imgs, func(a, b runtime.Image) int {
		if c := cmp.Compare(b.Size, a.Size); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if max >= 0 && len(imgs) > max {
		imgs = imgs[:max]
	}
	names := func(im *runtime.Image) []string {
		n := im.RepoTags
		if len(n) == 0 {
			n = []string{im.ID}
		}
		if len(n) > maxNamesPerImage {
			n = n[:maxNamesPerImage]
		}
		return n
	}
	same := len(old) == len(imgs)
	for i := 0; same && i < len(imgs); i++ {
		same = old[i].SizeBytes == int64(imgs[i].Size) && slices.Equal(old[i].Names, names(&imgs[i]))
	}
	if same {
		return old
	}
	out := make([]v1.ContainerImage, len(imgs))
	for i := range imgs {
		out[i] = v1.ContainerImage{Names: slices.Clone(names(&imgs[i])), SizeBytes: int64(imgs[i].Size)}
	}
	return out
}

// setPressure sets a pressure condition as the kubelet's setters do: the
// reason and message change only with the status, so what another writer
// put there stays while the status holds.
func setPressure(conds []v1.NodeCondition, typ v1.NodeConditionType, under bool, now metav1.Time, trueReason, trueMsg, falseReason, falseMsg string) []v1.NodeCondition {
	c := v1.NodeCondition{Type: typ, Status: v1.ConditionFalse, Reason: falseReason, Message: falseMsg}
	if under {
		c.Status, c.Reason, c.Message = v1.ConditionTrue, trueReason, trueMsg
	}
	if o := findCondition(conds, typ); o != nil && o.Status == c.Status {
		c.Reason, c.Message = o.Reason, o.Message
	}
	return setCondition(conds, c, now)
}

// setCondition puts c into conds in place of the one of its type, or at
// the end: lastTransitionTime moves only when the status changes, the
// heartbeat always.
func setCondition(conds []v1.NodeCondition, c v1.NodeCondition, now metav1.Time) []v1.NodeCondition {
	c.LastHeartbeatTime = now
	for i := range conds {
		if conds[i].Type != c.Type {
			continue
		}
		if conds[i].Status == c.Status && !conds[i].LastTransitionTime.IsZero() {
			c.LastTransitionTime = conds[i].LastTransitionTime
		} else {
			c.LastTransitionTime = now
		}
		conds[i] = c
		return conds
	}
	c.LastTransitionTime = now
	return append(conds, c)
}

// statusChanged reports whether st differs from old in anything but
// heartbeat times, the kubelet's nodeStatusHasChanged for the fields the
// controller writes.
func statusChanged(old, st *v1.NodeStatus) bool {
	if len(old.Conditions) != len(st.Conditions) || old.Phase != st.Phase ||
		!resourcesEqual(old.Capacity, st.Capacity) || !resourcesEqual(old.Allocatable, st.Allocatable) ||
		!slices.Equal(old.Addresses, st.Addresses) || old.DaemonEndpoints != st.DaemonEndpoints ||
		!nodeInfoEqual(&old.NodeInfo, &st.NodeInfo) || !imagesEqual(old.Images, st.Images) {
		return true
	}
	for i := range st.Conditions {
		n := &st.Conditions[i]
		o := findCondition(old.Conditions, n.Type)
		if o == nil || o.Status != n.Status || o.Reason != n.Reason || o.Message != n.Message ||
			!o.LastTransitionTime.Equal(&n.LastTransitionTime) {
			return true
		}
	}
	return false
}

func findCondition(conds []v1.NodeCondition, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func resourcesEqual(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, qa := range a {
		qb, ok := b[k]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

func nodeInfoEqual(a, b *v1.NodeSystemInfo) bool {
	x, y := *a, *b
	x.Swap, y.Swap, x.RunningInUserNamespace, y.RunningInUserNamespace = nil, nil, nil, nil
	// By value: a provider's Swap is its own pointer, the Node's another.
	return x == y && apiequality.Semantic.DeepEqual(a.Swap, b.Swap) && apiequality.Semantic.DeepEqual(a.RunningInUserNamespace, b.RunningInUserNamespace)
}

func imagesEqual(a, b []v1.ContainerImage) bool {
	return slices.EqualFunc(a, b, func(x, y v1.ContainerImage) bool {
		return x.SizeBytes == y.SizeBytes && slices.Equal(x.Names, y.Names)
	})
}
