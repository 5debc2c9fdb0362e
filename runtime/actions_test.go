package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Builders for pods and statuses. Containers are built from a name only, so a
// status built from the same name carries the spec's hash.

func ctr(name string) v1.Container { return v1.Container{Name: name, Image: name + ":1"} }

func sidecar(name string) v1.Container {
	c := ctr(name)
	c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	return c
}

type podOpt func(*v1.Pod)

func newPod(opts ...podOpt) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID = "web", "default", "uid-web"
	p.Spec.RestartPolicy = v1.RestartPolicyAlways
	p.Spec.Containers = []v1.Container{ctr("app")}
	for _, o := range opts {
		o(p)
	}
	return p
}

func containers(cs ...v1.Container) podOpt { return func(p *v1.Pod) { p.Spec.Containers = cs } }
func inits(cs ...v1.Container) podOpt      { return func(p *v1.Pod) { p.Spec.InitContainers = cs } }
func policy(r v1.RestartPolicy) podOpt     { return func(p *v1.Pod) { p.Spec.RestartPolicy = r } }
func hostNetwork(p *v1.Pod)                { p.Spec.HostNetwork = true }
func deleting(p *v1.Pod)                   { p.DeletionTimestamp = &metav1.Time{} }
func ephemeral(names ...string) podOpt {
	return func(p *v1.Pod) {
		for _, n := range names {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers,
				v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: n + ":1"}})
		}
	}
}

func cstat(c v1.Container, state ContainerState, exit int) *ContainerStatus {
	return &ContainerStatus{
		ID:   ContainerID{Type: "fake", ID: c.Name + "-" + string(state)},
		Name: c.Name, State: state, ExitCode: exit,
		Hash:      HashContainer(&c),
		SandboxID: "sb1",
	}
}

func running(c v1.Container) *ContainerStatus          { return cstat(c, ContainerStateRunning, 0) }
func exited(c v1.Container, code int) *ContainerStatus { return cstat(c, ContainerStateExited, code) }
func unknown(c v1.Container) *ContainerStatus          { return cstat(c, ContainerStateUnknown, 0) }
func created(c v1.Container) *ContainerStatus          { return cstat(c, ContainerStateCreated, 0) }

func inSandbox(id string, cs *ContainerStatus) *ContainerStatus {
	cs.SandboxID = id
	return cs
}

func readySandbox() *SandboxStatus {
	return &SandboxStatus{ID: "sb1", State: SandboxStateReady, Attempt: 1, IPs: []string{"10.0.0.7"}}
}

// ready is a status with a healthy sandbox sb1 and the given containers.
func ready(cs ...*ContainerStatus) *PodStatus {
	return &PodStatus{ID: "uid-web", SandboxStatuses: []*SandboxStatus{readySandbox()}, ContainerStatuses: cs}
}

// deadSandbox is a status whose only sandbox (attempt 1) stopped.
func deadSandbox(cs ...*ContainerStatus) *PodStatus {
	st := ready(cs...)
	st.SandboxStatuses[0].State = SandboxStateNotReady
	return st
}

// plan is PodActions without the sandbox ID and with kills by name -> reason,
// which is what most tests compare.
type plan struct {
	KillPod       bool
	CreateSandbox bool
	Init          []int
	Start         []int
	Ephemeral     []int
	Kill          map[string]string
}

func planOf(a PodActions) plan {
	p := plan{KillPod: a.KillPod, CreateSandbox: a.CreateSandbox,
		Init: a.InitContainersToStart, Start: a.ContainersToStart, Ephemeral: a.EphemeralContainersToStart}
	for id, k := range a.ContainersToKill {
		if p.Kill == nil {
			p.Kill = map[string]string{}
		}
		p.Kill[k.Name] = k.Reason
		if id.IsEmpty() {
			p.Kill[k.Name] += " (empty ID)"
		}
	}
	return p
}

type actionCase struct {
	name   string
	pod    *v1.Pod
	status *PodStatus
	want   plan
}

func runActionCases(t *testing.T, cases []actionCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, planOf(ComputePodActions(tt.pod, tt.status)))
		})
	}
}

var (
	app  = ctr("app")
	app2 = ctr("app2")
	i0   = ctr("init0")
	i1   = ctr("init1")
	sc0  = sidecar("sidecar0")
	sc2  = sidecar("sidecar2")
)

func TestComputePodActionsSandbox(t *testing.T) {
	twoReady := ready(running(app))
	twoReady.SandboxStatuses = append(twoReady.SandboxStatuses, &SandboxStatus{ID: "sb0", State: SandboxStateReady, IPs: []string{"10.0.0.6"}})
	noIP := ready(running(app))
	noIP.SandboxStatuses[0].IPs = nil
	hostNoIP := ready(running(app))
	hostNoIP.SandboxStatuses[0].IPs = nil
	hostNoIP.SandboxStatuses[0].HostNetwork = true
	networkChanged := ready(running(app))

	tests := []struct {
		name        string
		pod         *v1.Pod
		status      *PodStatus
		want        plan
		wantID      string
		wantAttempt uint32
	}{
		{
			name: "new pod gets a sandbox and all its containers",
			pod:  newPod(containers(app, app2)), status: nil,
			want: plan{KillPod: true, CreateSandbox: true, Start: []int{0, 1}},
		},
		{
			name: "pod without any sandbox status gets its first sandbox",
			pod:  newPod(), status: &PodStatus{ID: "uid-web"},
			want: plan{KillPod: true, CreateSandbox: true, Start: []int{0}},
		},
		{
			name: "new pod with init containers starts only the first init container",
			pod:  newPod(inits(i0, i1)), status: nil,
			want: plan{KillPod: true, CreateSandbox: true, Init: []int{0}},
		},
		{
			name: "stopped sandbox is replaced with the next attempt and the containers restart",
			pod:  newPod(), status: deadSandbox(running(app)),
			want:   plan{KillPod: true, CreateSandbox: true, Start: []int{0}},
			wantID: "sb1", wantAttempt: 2,
		},
		{
			name: "replaced sandbox runs the init containers again from the first",
			pod:  newPod(inits(i0, i1)), status: deadSandbox(exited(i0, 0), exited(i1, 0), running(app)),
			want:   plan{KillPod: true, CreateSandbox: true, Init: []int{0}},
			wantID: "sb1", wantAttempt: 2,
		},
		{
			name: "two ready sandboxes are reconciled into a new one",
			pod:  newPod(), status: twoReady,
			want:   plan{KillPod: true, CreateSandbox: true, Start: []int{0}},
			wantID: "sb1", wantAttempt: 2,
		},
		{
			name: "switch to host network needs a new sandbox",
			pod:  newPod(hostNetwork), status: networkChanged,
			want:   plan{KillPod: true, CreateSandbox: true, Start: []int{0}},
			wantID: "", wantAttempt: 2,
		},
		{
			name: "sandbox without an IP is replaced for a pod-network pod",
			pod:  newPod(), status: noIP,
			want:   plan{KillPod: true, CreateSandbox: true, Start: []int{0}},
			wantID: "sb1", wantAttempt: 2,
		},
		{
			name: "host-network sandbox needs no IP",
			pod:  newPod(hostNetwork), status: hostNoIP,
			want:   plan{},
			wantID: "sb1", wantAttempt: 1,
		},
		{
			name: "stopped sandbox of a Never pod whose containers ran is not recreated",
			pod:  newPod(policy(v1.RestartPolicyNever)), status: deadSandbox(exited(app, 1)),
			want:   plan{KillPod: true},
			wantID: "sb1", wantAttempt: 2,
		},
		{
			name: "stopped sandbox of a Never pod with a running container is not recreated",
			pod:  newPod(policy(v1.RestartPolicyNever)), status: deadSandbox(running(app)),
			want:   plan{KillPod: true},
			wantID: "sb1", wantAttempt: 2,
		},
		{
			name: "first sandbox of a Never pod is retried while no container ran",
			pod:  newPod(policy(v1.RestartPolicyNever)), status: &PodStatus{SandboxStatuses: []*SandboxStatus{{ID: "sb0", State: SandboxStateNotReady}}},
			want:   plan{KillPod: true, CreateSandbox: true, Start: []int{0}},
			wantID: "sb0", wantAttempt: 1,
		},
		{
			name: "replaced sandbox of an OnFailure pod restarts only the failed containers",
			pod:  newPod(policy(v1.RestartPolicyOnFailure), containers(app, app2)), status: deadSandbox(exited(app, 0), exited(app2, 2)),
			want:   plan{KillPod: true, CreateSandbox: true, Start: []int{0 + 1}},
			wantID: "sb1", wantAttempt: 2,
		},
		{
			name: "stopped sandbox of an OnFailure pod whose containers all succeeded is not recreated",
			pod:  newPod(policy(v1.RestartPolicyOnFailure), containers(app, app2)), status: deadSandbox(exited(app, 0), exited(app2, 0)),
			want:   plan{KillPod: true},
			wantID: "sb1", wantAttempt: 2,
		},
		{
			name: "replaced sandbox does not start a container whose own policy is Never",
			pod: newPod(containers(func() v1.Container {
				c := ctr("job")
				c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyNever)
				return c
			}(), app)),
			status: deadSandbox(exited(func() v1.Container {
				c := ctr("job")
				c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyNever)
				return c
			}(), 1), running(app)),
			want:   plan{KillPod: true, CreateSandbox: true, Start: []int{1}},
			wantID: "sb1", wantAttempt: 2,
		},
		{
			name: "ephemeral containers wait for the new sandbox",
			pod:  newPod(ephemeral("debug")), status: nil,
			want: plan{KillPod: true, CreateSandbox: true, Start: []int{0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ComputePodActions(tt.pod, tt.status)
			assert.Equal(t, tt.want, planOf(got))
			assert.Equal(t, tt.wantID, got.SandboxID, "SandboxID")
			assert.Equal(t, tt.wantAttempt, got.Attempt, "Attempt")
		})
	}
}

func TestComputePodActionsRestartPolicy(t *testing.T) {
	// "app" keeps running; "job" exited with the given code.
	job := ctr("job")
	type cell struct {
		policy v1.RestartPolicy
		code   int
		start  bool
	}
	cells := []cell{
		{v1.RestartPolicyAlways, 0, true},
		{v1.RestartPolicyAlways, 1, true},
		{v1.RestartPolicyOnFailure, 0, false},
		{v1.RestartPolicyOnFailure, 1, true},
		{v1.RestartPolicyNever, 0, false},
		{v1.RestartPolicyNever, 1, false},
		{"", 0, true}, // unset behaves as Always
	}
	var cases []actionCase
	for _, c := range cells {
		want := plan{}
		name := "exited container is not restarted"
		if c.start {
			want.Start = []int{1}
			name = "exited container is restarted"
		}
		cases = append(cases, actionCase{
			name:   name + " under " + string(c.policy) + " after exit " + map[int]string{0: "0", 1: "1"}[c.code],
			pod:    newPod(policy(c.policy), containers(app, job)),
			status: ready(running(app), exited(job, c.code)),
			want:   want,
		})
	}
	runActionCases(t, cases)
}

func TestComputePodActionsContainers(t *testing.T) {
	changedApp := ctr("app")
	changedApp.Image = "app:2"
	zeroHash := running(app)
	zeroHash.Hash = 0
	ctrPolicy := func(name string, p v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) v1.Container {
		c := ctr(name)
		c.RestartPolicy = ptr.To(p)
		c.RestartPolicyRules = rules
		return c
	}
	restartOn := func(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
		return v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
	}
	neverUnless42 := ctrPolicy("job", v1.ContainerRestartPolicyNever, restartOn(v1.ContainerRestartRuleOnExitCodesOpIn, 42))
	alwaysInNeverPod := ctrPolicy("job", v1.ContainerRestartPolicyAlways)
	neverInAlwaysPod := ctrPolicy("job", v1.ContainerRestartPolicyNever)
	onFailure := ctrPolicy("job", v1.ContainerRestartPolicyOnFailure)
	restartUnless0 := ctrPolicy("job", v1.ContainerRestartPolicyNever, restartOn(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0))

	runActionCases(t, []actionCase{
		{
			name: "running containers are kept and nothing happens",
			pod:  newPod(containers(app, app2)), status: ready(running(app), running(app2)),
			want: plan{},
		},
		{
			name: "container never started is started",
			pod:  newPod(containers(app, app2)), status: ready(running(app)),
			want: plan{Start: []int{1}},
		},
		{
			name: "container stuck in created is started again",
			pod:  newPod(), status: ready(created(app)),
			want: plan{Start: []int{0}},
		},
		{
			name: "container in unknown state is killed before its restart",
			pod:  newPod(), status: ready(unknown(app)),
			want: plan{Start: []int{0}, Kill: map[string]string{"app": KillReasonUnknownState}},
		},
		{
			name: "container in unknown state is killed and started even under Never",
			pod:  newPod(policy(v1.RestartPolicyNever)), status: ready(unknown(app)),
			want: plan{Start: []int{0}, Kill: map[string]string{"app": KillReasonUnknownState}},
		},
		{
			name: "changed spec restarts the running container",
			pod:  newPod(containers(changedApp)), status: ready(running(app)),
			want: plan{Start: []int{0}, Kill: map[string]string{"app": KillReasonSpecChanged}},
		},
		{
			name: "changed spec restarts the running container even under Never",
			pod:  newPod(policy(v1.RestartPolicyNever), containers(changedApp)), status: ready(running(app)),
			want: plan{Start: []int{0}, Kill: map[string]string{"app": KillReasonSpecChanged}},
		},
		{
			name: "a status without hash is not taken for a changed spec",
			pod:  newPod(), status: ready(zeroHash),
			want: plan{},
		},
		{
			name: "newest instance decides: a running restart after an exit is kept",
			pod:  newPod(), status: ready(running(app), exited(app, 1)),
			want: plan{},
		},
		{
			name: "nothing to keep and nothing to start kills the pod",
			pod:  newPod(policy(v1.RestartPolicyNever), containers(app, app2)), status: ready(exited(app, 0), exited(app2, 1)),
			want: plan{KillPod: true},
		},
		{
			name: "all succeeded under OnFailure kills the pod",
			pod:  newPod(policy(v1.RestartPolicyOnFailure)), status: ready(exited(app, 0)),
			want: plan{KillPod: true},
		},
		{
			name: "pod being deleted restarts nothing and keeps what runs",
			pod:  newPod(deleting, containers(app, app2)), status: ready(running(app), exited(app2, 1)),
			want: plan{},
		},
		{
			name: "pod being deleted with nothing running is killed",
			pod:  newPod(deleting), status: ready(exited(app, 1)),
			want: plan{KillPod: true},
		},
		{
			name: "container policy Never overrides the pod's Always",
			pod:  newPod(containers(app, neverInAlwaysPod)), status: ready(running(app), exited(neverInAlwaysPod, 1)),
			want: plan{},
		},
		{
			name: "container policy Always overrides the pod's Never",
			pod:  newPod(policy(v1.RestartPolicyNever), containers(app, alwaysInNeverPod)), status: ready(running(app), exited(alwaysInNeverPod, 0)),
			want: plan{Start: []int{1}},
		},
		{
			name: "container policy OnFailure restarts a failure",
			pod:  newPod(policy(v1.RestartPolicyNever), containers(app, onFailure)), status: ready(running(app), exited(onFailure, 3)),
			want: plan{Start: []int{1}},
		},
		{
			name: "container policy OnFailure keeps a success down",
			pod:  newPod(containers(app, onFailure)), status: ready(running(app), exited(onFailure, 0)),
			want: plan{},
		},
		{
			name: "restart rule matching the exit code restarts despite policy Never",
			pod:  newPod(containers(app, neverUnless42)), status: ready(running(app), exited(neverUnless42, 42)),
			want: plan{Start: []int{1}},
		},
		{
			name: "restart rule not matching the exit code falls back to policy Never",
			pod:  newPod(containers(app, neverUnless42)), status: ready(running(app), exited(neverUnless42, 1)),
			want: plan{},
		},
		{
			name: "NotIn restart rule restarts any code outside its list",
			pod:  newPod(containers(app, restartUnless0)), status: ready(running(app), exited(restartUnless0, 7)),
			want: plan{Start: []int{1}},
		},
		{
			name: "NotIn restart rule leaves a listed code to the policy",
			pod:  newPod(containers(app, restartUnless0)), status: ready(running(app), exited(restartUnless0, 0)),
			want: plan{},
		},
	})
}

func TestComputePodActionsInitContainers(t *testing.T) {
	oom := exited(i0, 0)
	oom.Reason = "OOMKilled"
	runActionCases(t, []actionCase{
		{
			name: "running init container is awaited and nothing else starts",
			pod:  newPod(inits(i0, i1)), status: ready(running(i0)),
			want: plan{},
		},
		{
			name: "first init container missing in a ready sandbox is started",
			pod:  newPod(inits(i0, i1)), status: ready(),
			want: plan{Init: []int{0}},
		},
		{
			name: "succeeded init container starts the next one",
			pod:  newPod(inits(i0, i1)), status: ready(exited(i0, 0)),
			want: plan{Init: []int{1}},
		},
		{
			name: "last init container succeeded starts the app containers",
			pod:  newPod(inits(i0, i1), containers(app, app2)), status: ready(exited(i0, 0), exited(i1, 0)),
			want: plan{Start: []int{0, 1}},
		},
		{
			name: "failed init container is restarted under Always",
			pod:  newPod(inits(i0, i1)), status: ready(exited(i0, 1)),
			want: plan{Init: []int{0}},
		},
		{
			name: "failed init container is restarted under OnFailure",
			pod:  newPod(policy(v1.RestartPolicyOnFailure), inits(i0, i1)), status: ready(exited(i0, 0), exited(i1, 2)),
			want: plan{Init: []int{1}},
		},
		{
			name: "failed init container under Never kills the pod",
			pod:  newPod(policy(v1.RestartPolicyNever), inits(i0, i1)), status: ready(exited(i0, 0), exited(i1, 2)),
			want: plan{KillPod: true},
		},
		{
			name: "OOM-killed init container counts as failed",
			pod:  newPod(policy(v1.RestartPolicyNever), inits(i0)), status: ready(oom),
			want: plan{KillPod: true},
		},
		{
			name: "init container in unknown state is killed and restarted",
			pod:  newPod(inits(i0, i1)), status: ready(unknown(i0)),
			want: plan{Init: []int{0}, Kill: map[string]string{"init0": KillReasonUnknownState}},
		},
		{
			name: "init container in unknown state under Never kills the pod",
			pod:  newPod(policy(v1.RestartPolicyNever), inits(i0)), status: ready(unknown(i0)),
			want: plan{KillPod: true},
		},
		{
			name: "init container stuck in created is started again",
			pod:  newPod(inits(i0, i1)), status: ready(exited(i0, 0), created(i1)),
			want: plan{Init: []int{1}},
		},
		{
			name: "init containers garbage collected after initialization are not run again",
			pod:  newPod(inits(i0, i1)), status: ready(running(app)),
			want: plan{},
		},
		{
			name: "only the last init container's status is needed to go on",
			pod:  newPod(inits(i0, i1)), status: ready(exited(i1, 0)),
			want: plan{Start: []int{0}},
		},
		{
			name: "app container of an earlier sandbox does not count as initialized",
			pod:  newPod(inits(i0, i1)),
			status: ready(running(i0),
				inSandbox("sb0", exited(i1, 0)), inSandbox("sb0", exited(app, 0))),
			want: plan{},
		},
		{
			name: "ephemeral containers start during initialization",
			pod:  newPod(inits(i0), ephemeral("debug")), status: ready(running(i0)),
			want: plan{Ephemeral: []int{0}},
		},
	})
}

func TestComputePodActionsSidecars(t *testing.T) {
	changedSidecar := sidecar("sidecar0")
	changedSidecar.Image = "sidecar0:2"
	runActionCases(t, []actionCase{
		{
			name: "started sidecar lets the next init container start",
			pod:  newPod(inits(sc0, i1)), status: ready(running(sc0)),
			want: plan{Init: []int{1}},
		},
		{
			name: "running sidecar as the last init container lets the app start",
			pod:  newPod(inits(i0, sc0)), status: ready(exited(i0, 0), running(sc0)),
			want: plan{Start: []int{0}},
		},
		{
			name: "sidecar whose startup probe is pending holds the next init container",
			pod:  newPod(inits(sc0, i1)), status: ready(startupPending(running(sc0))),
			want: plan{},
		},
		{
			name: "last sidecar whose startup probe is pending holds the app",
			pod:  newPod(inits(i0, sc0)), status: ready(exited(i0, 0), startupPending(running(sc0))),
			want: plan{},
		},
		{
			name: "a pending startup probe does not hold a pod initialized before",
			pod:  newPod(inits(sc0)), status: ready(startupPending(running(sc0)), running(app)),
			want: plan{},
		},
		{
			name: "sidecar keeps running beside a running init container",
			pod:  newPod(inits(sc0, i1)), status: ready(running(sc0), running(i1)),
			want: plan{},
		},
		{
			name: "exited sidecar is restarted during initialization and blocks the app",
			pod:  newPod(inits(sc0, i1, sc2)), status: ready(running(sc0), exited(i1, 0), exited(sc2, 0)),
			want: plan{Init: []int{2}},
		},
		{
			name: "exited sidecar is restarted after initialization",
			pod:  newPod(inits(sc0)), status: ready(exited(sc0, 1), running(app)),
			want: plan{Init: []int{0}},
		},
		{
			name: "exited sidecar is restarted even under Never",
			pod:  newPod(policy(v1.RestartPolicyNever), inits(sc0)), status: ready(exited(sc0, 1), running(app)),
			want: plan{Init: []int{0}},
		},
		{
			name: "sidecar garbage collected after initialization is started again",
			pod:  newPod(inits(sc0, i1)), status: ready(running(app)),
			want: plan{Init: []int{0}},
		},
		{
			name: "sidecars restart in spec order",
			pod:  newPod(inits(sc0, i1, sc2)), status: ready(exited(sc0, 1), exited(sc2, 1), running(app)),
			want: plan{Init: []int{0, 2}},
		},
		{
			name: "sidecar with a changed spec is killed and restarted",
			pod:  newPod(inits(changedSidecar)), status: ready(running(sc0), running(app)),
			want: plan{Init: []int{0}, Kill: map[string]string{"sidecar0": KillReasonSpecChanged}},
		},
		{
			name: "sidecar in unknown state is killed and restarted",
			pod:  newPod(inits(sc0)), status: ready(unknown(sc0), running(app)),
			want: plan{Init: []int{0}, Kill: map[string]string{"sidecar0": KillReasonUnknownState}},
		},
		{
			name: "sidecar alone does not keep a finished pod alive",
			pod:  newPod(policy(v1.RestartPolicyOnFailure), inits(sc0)), status: ready(running(sc0), exited(app, 0)),
			want: plan{KillPod: true},
		},
		{
			name: "exited sidecar of a finished pod is not restarted",
			pod:  newPod(policy(v1.RestartPolicyNever), inits(sc0)), status: ready(exited(sc0, 1), exited(app, 1)),
			want: plan{KillPod: true},
		},
	})
}

func TestComputePodActionsEphemeral(t *testing.T) {
	debug := ctr("debug")
	runActionCases(t, []actionCase{
		{
			name: "ephemeral container without status is started",
			pod:  newPod(ephemeral("debug")), status: ready(running(app)),
			want: plan{Ephemeral: []int{0}},
		},
		{
			name: "running ephemeral container is left alone",
			pod:  newPod(ephemeral("debug")), status: ready(running(app), running(debug)),
			want: plan{},
		},
		{
			name: "exited ephemeral container is never restarted",
			pod:  newPod(ephemeral("debug")), status: ready(running(app), exited(debug, 1)),
			want: plan{},
		},
		{
			name: "only the missing ephemeral containers start",
			pod:  newPod(ephemeral("debug", "trace")), status: ready(running(app), exited(debug, 0)),
			want: plan{Ephemeral: []int{1}},
		},
	})
}

func TestComputePodActionsKillDetails(t *testing.T) {
	changedApp := ctr("app")
	changedApp.Image = "app:2"
	pod := newPod(containers(app2, changedApp))
	old := running(app)
	lost := unknown(app2)
	a := ComputePodActions(pod, ready(lost, old))
	require.Len(t, a.ContainersToKill, 2)

	k := a.ContainersToKill[old.ID]
	assert.Equal(t, "app", k.Name)
	assert.Same(t, &pod.Spec.Containers[1], k.Container, "the spec points into the pod")
	assert.Equal(t, KillReasonSpecChanged, k.Reason)
	assert.Equal(t, "Container app definition changed, will be restarted", k.Message)

	k = a.ContainersToKill[lost.ID]
	assert.Equal(t, "app2", k.Name)
	assert.Same(t, &pod.Spec.Containers[0], k.Container)
	assert.Equal(t, `Container is in "unknown" state, try killing it before restart`, k.Message)
	assert.Equal(t, []int{0, 1}, a.ContainersToStart)

	assert.Nil(t, ComputePodActions(pod, ready(running(app2), running(changedApp))).ContainersToKill,
		"nothing to kill leaves the map nil")
}

func TestComputePodActionsDoesNotModifyInputs(t *testing.T) {
	pod := newPod(inits(sc0, i1), ephemeral("debug"))
	st := ready(running(sc0), exited(i1, 0), unknown(app))
	snapshot := func() (v1.Pod, []ContainerStatus, []SandboxStatus) {
		var cs []ContainerStatus
		for _, c := range st.ContainerStatuses {
			cs = append(cs, *c)
		}
		var ss []SandboxStatus
		for _, s := range st.SandboxStatuses {
			ss = append(ss, *s)
		}
		return *pod.DeepCopy(), cs, ss
	}
	p0, c0, s0 := snapshot()
	ComputePodActions(pod, st)
	p1, c1, s1 := snapshot()
	assert.Equal(t, p0, p1)
	assert.Equal(t, c0, c1)
	assert.Equal(t, s0, s1)
}

func BenchmarkComputePodActions(b *testing.B) {
	pod := newPod(inits(i0, sc0), containers(app, app2))
	st := ready(exited(i0, 0), running(sc0), running(app), running(app2))
	b.ReportAllocs()
	for b.Loop() {
		ComputePodActions(pod, st)
	}
}

func startupPending(cs *ContainerStatus) *ContainerStatus {
	cs.StartupPending = true
	return cs
}

// creating is a container an asynchronous backend accepted and is still
// creating (ReasonContainerCreating).
func creating(c v1.Container) *ContainerStatus {
	cs := cstat(c, ContainerStateCreated, 0)
	cs.Reason = ReasonContainerCreating
	return cs
}

func TestComputePodActionsAsyncBackend(t *testing.T) {
	runActionCases(t, []actionCase{
		{
			name: "a container still being created is not started twice",
			pod:  newPod(), status: ready(creating(app)),
			want: plan{},
		},
		{
			name: "a container still being created keeps the pod and its siblings start",
			pod:  newPod(containers(app, app2)), status: ready(creating(app)),
			want: plan{Start: []int{1}},
		},
		{
			name: "a created container whose start failed is still started again",
			pod:  newPod(), status: ready(created(app)),
			want: plan{Start: []int{0}},
		},
		{
			name: "an init container still being created is awaited",
			pod:  newPod(inits(i0, i1)), status: ready(creating(i0)),
			want: plan{},
		},
		{
			name: "a sidecar still being created is awaited, the next one not yet started",
			pod:  newPod(inits(sc0, i1)), status: ready(creating(sc0)),
			want: plan{},
		},
		{
			name: "once the backend reports it running it counts as running",
			pod:  newPod(inits(sc0, i1)), status: ready(running(sc0)),
			want: plan{Init: []int{1}},
		},
	})
}
