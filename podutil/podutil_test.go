package podutil

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(ann map[string]string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Annotations: ann}}
}

func withPriority(p *v1.Pod, priority int32) *v1.Pod {
	p.Spec.Priority = &priority
	return p
}

func TestPodKinds(t *testing.T) {
	tests := []struct {
		name                     string
		pod                      *v1.Pod
		static, mirror, critical bool
		source                   string
	}{
		{name: "nil pod is nothing", pod: nil},
		{name: "apiserver pod is neither static nor mirror", pod: pod(map[string]string{ConfigSourceAnnotationKey: ApiserverSource}), source: "api"},
		{name: "file pod is static", pod: pod(map[string]string{ConfigSourceAnnotationKey: FileSource}), static: true, critical: true, source: "file"},
		{name: "http pod is static", pod: pod(map[string]string{ConfigSourceAnnotationKey: HTTPSource}), static: true, critical: true, source: "http"},
		{name: "pod without source is not static", pod: pod(nil)},
		{name: "mirror annotation marks a mirror pod", pod: pod(map[string]string{ConfigMirrorAnnotationKey: "abc"}), mirror: true, critical: true},
		{name: "an apiserver pod of system-critical priority is critical", pod: withPriority(pod(nil), SystemCriticalPriority), critical: true},
		{name: "an apiserver pod of a lower priority is not", pod: withPriority(pod(nil), SystemCriticalPriority-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsStaticPod(tt.pod); got != tt.static {
				t.Errorf("IsStaticPod = %v, want %v", got, tt.static)
			}
			if got := IsMirrorPod(tt.pod); got != tt.mirror {
				t.Errorf("IsMirrorPod = %v, want %v", got, tt.mirror)
			}
			if got := IsCritical(tt.pod); got != tt.critical {
				t.Errorf("IsCritical = %v, want %v", got, tt.critical)
			}
			if got := Source(tt.pod); got != tt.source {
				t.Errorf("Source = %q, want %q", got, tt.source)
			}
		})
	}
}

func TestFullNameJoinsNameAndNamespace(t *testing.T) {
	if got := FullName(pod(nil)); got != "web_ns" {
		t.Fatalf("FullName = %q, want web_ns", got)
	}
}

func TestOnlyAnInitContainerWithRestartPolicyAlwaysIsASidecar(t *testing.T) {
	always, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicy("Never")
	for _, tc := range []struct {
		name   string
		policy *v1.ContainerRestartPolicy
		want   bool
	}{
		{"no restart policy", nil, false},
		{"restart policy Always", &always, true},
		{"another restart policy", &never, false},
	} {
		if got := IsRestartableInitContainer(&v1.Container{RestartPolicy: tc.policy}); got != tc.want {
			t.Errorf("%s: IsRestartableInitContainer = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSysctlWithDots(t *testing.T) {
	for in, want := range map[string]string{
		"net.ipv4.ip_local_port_range":     "net.ipv4.ip_local_port_range",
		"net/ipv4/ip_local_port_range":     "net.ipv4.ip_local_port_range",
		"net/ipv4/conf/eno2.100/rp_filter": "net.ipv4.conf.eno2/100.rp_filter",
		"net.ipv4.conf.eno2/100.rp_filter": "net.ipv4.conf.eno2/100.rp_filter",
		"kernel":                           "kernel",
	} {
		if got := SysctlWithDots(in); got != want {
			t.Errorf("SysctlWithDots(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestContainerShouldRestart(t *testing.T) {
	always, never, onFailure := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure
	rule := func(action v1.ContainerRestartRuleAction, op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
		return v1.ContainerRestartRule{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
	}
	restart, all := v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers
	in, notIn := v1.ContainerRestartRuleOnExitCodesOpIn, v1.ContainerRestartRuleOnExitCodesOpNotIn
	cases := []struct {
		name      string
		pod       v1.RestartPolicy
		container *v1.ContainerRestartPolicy
		rules     []v1.ContainerRestartRule
		exitCode  int32
		want      bool
	}{
		{name: "pod Always restarts a success", pod: v1.RestartPolicyAlways, want: true},
		{name: "pod default (empty) restarts", exitCode: 1, want: true},
		{name: "pod OnFailure restarts a failure", pod: v1.RestartPolicyOnFailure, exitCode: 1, want: true},
		{name: "pod OnFailure keeps a success down", pod: v1.RestartPolicyOnFailure},
		{name: "pod Never keeps a failure down", pod: v1.RestartPolicyNever, exitCode: 1},
		{name: "container Never overrides pod Always", pod: v1.RestartPolicyAlways, container: &never, exitCode: 1},
		{name: "container Always overrides pod Never", pod: v1.RestartPolicyNever, container: &always, want: true},
		{name: "container OnFailure overrides pod Never on a failure", pod: v1.RestartPolicyNever, container: &onFailure, exitCode: 2, want: true},
		{name: "container OnFailure keeps a success down under pod Always", pod: v1.RestartPolicyAlways, container: &onFailure},
		{name: "a matching In rule restarts over container Never", pod: v1.RestartPolicyNever, container: &never,
			rules: []v1.ContainerRestartRule{rule(restart, in, 42)}, exitCode: 42, want: true},
		{name: "a non-matching In rule falls back to container Never", pod: v1.RestartPolicyNever, container: &never,
			rules: []v1.ContainerRestartRule{rule(restart, in, 42)}, exitCode: 1},
		{name: "a matching NotIn rule restarts", pod: v1.RestartPolicyNever, container: &never,
			rules: []v1.ContainerRestartRule{rule(restart, notIn, 0)}, exitCode: 3, want: true},
		{name: "a non-matching NotIn rule falls back to the policy", pod: v1.RestartPolicyNever, container: &never,
			rules: []v1.ContainerRestartRule{rule(restart, notIn, 0)}},
		{name: "the first matching rule decides", pod: v1.RestartPolicyNever, container: &never,
			rules: []v1.ContainerRestartRule{rule(all, in, 42), rule(restart, in, 42)}, exitCode: 42},
		{name: "rules are ignored without a container policy", pod: v1.RestartPolicyNever,
			rules: []v1.ContainerRestartRule{rule(restart, in, 42)}, exitCode: 42},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", RestartPolicy: tc.container, RestartPolicyRules: tc.rules}
			if got := ContainerShouldRestart(c, &v1.PodSpec{RestartPolicy: tc.pod}, tc.exitCode); got != tc.want {
				t.Errorf("ContainerShouldRestart = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestContainerMayRestart(t *testing.T) {
	never, onFailure := v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure
	for _, tc := range []struct {
		name      string
		container *v1.ContainerRestartPolicy
		pod       v1.RestartPolicy
		want      bool
	}{
		{"the pod's Always", nil, v1.RestartPolicyAlways, true},
		{"the pod's OnFailure", nil, v1.RestartPolicyOnFailure, true},
		{"the pod's Never", nil, v1.RestartPolicyNever, false},
		{"the container's Never over the pod's Always", &never, v1.RestartPolicyAlways, false},
		{"the container's OnFailure over the pod's Never", &onFailure, v1.RestartPolicyNever, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "app", RestartPolicy: tc.container}
			if got := ContainerMayRestart(c, &v1.PodSpec{RestartPolicy: tc.pod}); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
