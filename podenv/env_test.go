package podenv_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/objects/objectstest"
	"github.com/nodekit/nodekit/podenv"
)

type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(_ runtime.Object, typ, reason, msg string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, typ+" "+reason+" "+fmt.Sprintf(msg, args...))
}

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1",
			Labels: map[string]string{"app": "web", "tier": "front"}, Annotations: map[string]string{"a": "x\"y"}},
		Spec: v1.PodSpec{NodeName: "node-1", ServiceAccountName: "sa"},
	}
}

func testAPI() *objectstest.API {
	api := objectstest.New()
	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"k": "v", "mode": "fast", "bad=key": "x", "1st": "ok"}})
	api.Set(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sec"}, Data: map[string][]byte{"password": []byte("hunter2")}})
	api.Set(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
		Spec: v1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []v1.ServicePort{{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}}}})
	api.Set(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "my-db"},
		Spec: v1.ServiceSpec{ClusterIP: "10.0.0.5", Ports: []v1.ServicePort{{Port: 5432}}}})
	api.Set(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "headless"},
		Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Ports: []v1.ServicePort{{Port: 80}}}})
	return api
}

func resolver(api *objectstest.API, rec podenv.EventRecorder) *podenv.Resolver {
	cache := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets, Services: api.Services})
	return podenv.New(podenv.Config{Objects: cache, Services: cache, HostIPs: []string{"192.168.1.10", "fd00::10"},
		NodeAllocatable: func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
		},
		Recorder: rec})
}

func field(path string) *v1.EnvVarSource {
	return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}
}

func res(r, div string) *v1.EnvVarSource {
	s := &v1.ResourceFieldSelector{Resource: r}
	if div != "" {
		s.Divisor = resource.MustParse(div)
	}
	return &v1.EnvVarSource{ResourceFieldRef: s}
}

func asMap(vars []podenv.Var) map[string]string {
	m := map[string]string{}
	for _, v := range vars {
		m[v.Name] = v.Value
	}
	return m
}

func TestEnvSources(t *testing.T) {
	cmKey := func(name, key string, opt bool) *v1.EnvVarSource {
		return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(opt)}}
	}
	secKey := func(name, key string, opt bool) *v1.EnvVarSource {
		return &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(opt)}}
	}
	limits := v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")},
	}
	for _, tc := range []struct {
		name    string
		env     []v1.EnvVar
		from    []v1.EnvFromSource
		res     v1.ResourceRequirements
		podIPs  []string
		want    map[string]string
		absent  []string
		wantErr string
	}{
		{name: "plain value", env: []v1.EnvVar{{Name: "A", Value: "1"}}, want: map[string]string{"A": "1"}},
		{name: "metadata fields", env: []v1.EnvVar{
			{Name: "N", ValueFrom: field("metadata.name")}, {Name: "NS", ValueFrom: field("metadata.namespace")},
			{Name: "U", ValueFrom: field("metadata.uid")}, {Name: "L", ValueFrom: field("metadata.labels['app']")},
			{Name: "AN", ValueFrom: field("metadata.annotations['a']")}, {Name: "NODE", ValueFrom: field("spec.nodeName")},
			{Name: "SA", ValueFrom: field("spec.serviceAccountName")},
		}, want: map[string]string{"N": "web", "NS": "ns", "U": "uid-1", "L": "web", "AN": "x\"y", "NODE": "node-1", "SA": "sa"}},
		{name: "status IPs", podIPs: []string{"10.1.0.7", "fd01::7"}, env: []v1.EnvVar{
			{Name: "PIP", ValueFrom: field("status.podIP")}, {Name: "PIPS", ValueFrom: field("status.podIPs")},
			{Name: "HIP", ValueFrom: field("status.hostIP")}, {Name: "HIPS", ValueFrom: field("status.hostIPs")},
		}, want: map[string]string{"PIP": "10.1.0.7", "PIPS": "10.1.0.7,fd01::7", "HIP": "192.168.1.10", "HIPS": "192.168.1.10,fd00::10"}},
		{name: "status IPs as the kubelet sorts them: node's primary family first, one per family", podIPs: []string{"fd01::7", "fd01::8", "10.1.0.7"}, env: []v1.EnvVar{
			{Name: "PIP", ValueFrom: field("status.podIP")}, {Name: "PIPS", ValueFrom: field("status.podIPs")},
		}, want: map[string]string{"PIP": "10.1.0.7", "PIPS": "10.1.0.7,fd01::7"}},
		{name: "unsupported field path is an error", env: []v1.EnvVar{{Name: "X", ValueFrom: field("spec.bogus")}}, wantErr: `env "X": field path "spec.bogus"`},
		{name: "resource limits and requests with divisor, allocatable for a missing limit", res: limits, env: []v1.EnvVar{
			{Name: "MEM", ValueFrom: res("limits.memory", "1Mi")}, {Name: "MEMB", ValueFrom: res("limits.memory", "")},
			{Name: "CPU", ValueFrom: res("limits.cpu", "")}, {Name: "CPUM", ValueFrom: res("limits.cpu", "1m")},
			{Name: "RCPU", ValueFrom: res("requests.cpu", "1m")}, {Name: "RCPU1", ValueFrom: res("requests.cpu", "")},
			{Name: "RMEM", ValueFrom: res("requests.memory", "1Mi")},
		}, want: map[string]string{"MEM": "64", "MEMB": "67108864", "CPU": "4", "CPUM": "4000", "RCPU": "250", "RCPU1": "1", "RMEM": "32"}},
		{name: "unsupported resource is an error", env: []v1.EnvVar{{Name: "X", ValueFrom: res("limits.gpu", "")}}, wantErr: "unsupported container resource"},
		{name: "configMapKeyRef", env: []v1.EnvVar{{Name: "K", ValueFrom: cmKey("cfg", "k", false)}}, want: map[string]string{"K": "v"}},
		{name: "secretKeyRef", env: []v1.EnvVar{{Name: "P", ValueFrom: secKey("sec", "password", false)}}, want: map[string]string{"P": "hunter2"}},
		{name: "missing configMap is the kubelet's error", env: []v1.EnvVar{{Name: "K", ValueFrom: cmKey("nope", "k", false)}}, wantErr: `configmaps "nope" not found`},
		{name: "missing secret is the kubelet's error", env: []v1.EnvVar{{Name: "K", ValueFrom: secKey("nope", "k", false)}}, wantErr: `secrets "nope" not found`},
		{name: "missing key is the kubelet's error", env: []v1.EnvVar{{Name: "K", ValueFrom: cmKey("cfg", "nokey", false)}}, wantErr: "couldn't find key nokey in ConfigMap ns/cfg"},
		{name: "missing secret key is the kubelet's error", env: []v1.EnvVar{{Name: "K", ValueFrom: secKey("sec", "nokey", false)}}, wantErr: "couldn't find key nokey in Secret ns/sec"},
		{name: "optional missing objects and keys are skipped", env: []v1.EnvVar{
			{Name: "A", ValueFrom: cmKey("nope", "k", true)}, {Name: "B", ValueFrom: cmKey("cfg", "nokey", true)},
			{Name: "C", ValueFrom: secKey("nope", "k", true)}, {Name: "D", ValueFrom: secKey("sec", "nokey", true)},
		}, absent: []string{"A", "B", "C", "D"}},
		{name: "envFrom with prefix, env overrides it", from: []v1.EnvFromSource{
			{Prefix: "CM_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
		}, env: []v1.EnvVar{{Name: "CM_k", Value: "override"}},
			want:   map[string]string{"CM_k": "override", "CM_mode": "fast", "CM_1st": "ok", "password": "hunter2"},
			absent: []string{"CM_bad=key"}},
		{name: "envFrom missing non-optional", from: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}}}},
			wantErr: `configmaps "nope" not found`},
		{name: "envFrom missing optional", from: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: ptr.To(true)}}},
			want: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}},
		{name: "expansion sees earlier vars, envFrom and services, not later ones", from: []v1.EnvFromSource{
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
		}, env: []v1.EnvVar{
			{Name: "A", Value: "a"}, {Name: "B", Value: "$(A)-$(mode)-$(C)-$$(A)"}, {Name: "C", Value: "c"},
			{Name: "URL", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
		}, want: map[string]string{"B": "a-fast-$(C)-$(A)", "URL": "https://10.0.0.1:443"}},
		{name: "service variables for master and own services", want: map[string]string{
			"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_SERVICE_PORT_HTTPS": "443",
			"KUBERNETES_PORT": "tcp://10.0.0.1:443", "KUBERNETES_PORT_443_TCP": "tcp://10.0.0.1:443",
			"KUBERNETES_PORT_443_TCP_PROTO": "tcp", "KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.0.0.1",
			"MY_DB_SERVICE_HOST": "10.0.0.5", "MY_DB_SERVICE_PORT": "5432", "MY_DB_PORT": "tcp://10.0.0.5:5432",
		}, absent: []string{"HEADLESS_SERVICE_HOST"}},
		{name: "a declared variable wins over a service variable", env: []v1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "mine"}},
			want: map[string]string{"KUBERNETES_SERVICE_HOST": "mine"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			r := resolver(testAPI(), rec)
			pod := testPod()
			c := v1.Container{Name: "c", Env: tc.env, EnvFrom: tc.from, Resources: tc.res}
			pod.Spec.Containers = []v1.Container{c}
			vars, err := r.Env(context.Background(), pod, &pod.Spec.Containers[0], tc.podIPs)
			if tc.wantErr != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			got := asMap(vars)
			require.Len(t, got, len(vars), "no variable appears twice")
			for k, v := range tc.want {
				assert.Equal(t, v, got[k], k)
			}
			for _, k := range tc.absent {
				assert.NotContains(t, got, k)
			}
		})
	}
}

func TestEnvFromInvalidKeysAreSkippedWithAnEvent(t *testing.T) {
	rec := &recorder{}
	r := resolver(testAPI(), rec)
	pod := testPod()
	pod.Spec.Containers = []v1.Container{{Name: "c", EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}}}
	_, err := r.Env(context.Background(), pod, &pod.Spec.Containers[0], nil)
	require.NoError(t, err)
	require.Equal(t, []string{"Warning InvalidEnvironmentVariableNames Keys [bad=key] from the EnvFrom configMap ns/cfg were skipped since they are considered invalid environment variable names."}, rec.events)
}

func TestEnableServiceLinksFalseKeepsOnlyTheMasterService(t *testing.T) {
	r := resolver(testAPI(), nil)
	pod := testPod()
	pod.Spec.EnableServiceLinks = ptr.To(false)
	pod.Spec.Containers = []v1.Container{{Name: "c"}}
	vars, err := r.Env(context.Background(), pod, &pod.Spec.Containers[0], nil)
	require.NoError(t, err)
	got := asMap(vars)
	require.Equal(t, "10.0.0.1", got["KUBERNETES_SERVICE_HOST"])
	require.NotContains(t, got, "MY_DB_SERVICE_HOST")
}

func TestMissingConfigMapWaitsThenResolves(t *testing.T) {
	api := testAPI()
	r := resolver(api, nil)
	pod := testPod()
	pod.Spec.Containers = []v1.Container{{Name: "c", Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "late"}, Key: "x"}}}}}}
	_, err := r.Env(context.Background(), pod, &pod.Spec.Containers[0], nil)
	require.True(t, apierrors.IsNotFound(err), "NotFound is not cached: %v", err)
	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "late"}, Data: map[string]string{"x": "here"}})
	vars, err := r.Env(context.Background(), pod, &pod.Spec.Containers[0], nil)
	require.NoError(t, err)
	require.Equal(t, "here", asMap(vars)["X"])
}

func TestNoObjectSourceIsAClearError(t *testing.T) {
	r := podenv.New(podenv.Config{})
	pod := testPod()
	pod.Spec.Containers = []v1.Container{{Name: "c", Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "x"}}}}}}
	_, err := r.Env(context.Background(), pod, &pod.Spec.Containers[0], nil)
	require.ErrorIs(t, err, podenv.ErrNoSource)
	require.Contains(t, err.Error(), "couldn't get secret ns/s")
}

func TestHostIPUnknownIsAnError(t *testing.T) {
	r := podenv.New(podenv.Config{})
	pod := testPod()
	pod.Spec.Containers = []v1.Container{{Name: "c", Env: []v1.EnvVar{{Name: "H", ValueFrom: field("status.hostIP")}}}}
	_, err := r.Env(context.Background(), pod, &pod.Spec.Containers[0], nil)
	require.ErrorContains(t, err, "node's IP is not known")
}

func TestHostNetworkPodIPIsTheHostIP(t *testing.T) {
	r := resolver(testAPI(), nil)
	pod := testPod()
	pod.Spec.HostNetwork = true
	pod.Spec.Containers = []v1.Container{{Name: "c", Env: []v1.EnvVar{{Name: "P", ValueFrom: field("status.podIP")}}}}
	vars, err := r.Env(context.Background(), pod, &pod.Spec.Containers[0], nil)
	require.NoError(t, err)
	require.Equal(t, "192.168.1.10", asMap(vars)["P"])
}

func TestResourceFieldRefOfAnotherContainerAndPodLimits(t *testing.T) {
	pod := testPod()
	pod.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}
	pod.Spec.Containers = []v1.Container{
		{Name: "main", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}}},
		{Name: "side"},
	}
	sel := &v1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.cpu"}
	v, err := podenv.ResourceValue(sel, pod, &pod.Spec.Containers[1], nil)
	require.NoError(t, err)
	require.Equal(t, "2", v, "1.5 cpu rounds up")
	v, err = podenv.ResourceValue(&v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}, pod, &pod.Spec.Containers[1], v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Gi")})
	require.NoError(t, err)
	require.Equal(t, "1024", v, "the pod's limit caps a container without one")
	_, err = podenv.ResourceValue(&v1.ResourceFieldSelector{ContainerName: "ghost", Resource: "limits.cpu"}, pod, nil, nil)
	require.ErrorContains(t, err, "container ghost not found")
}

func TestMetadataValueWholeMaps(t *testing.T) {
	v, err := podenv.MetadataValue(testPod(), "metadata.labels")
	require.NoError(t, err)
	require.Equal(t, "app=\"web\"\ntier=\"front\"", v)
	v, err = podenv.MetadataValue(testPod(), "metadata.annotations")
	require.NoError(t, err)
	require.Equal(t, `a="x\"y"`, v)
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "1", "B": "two"}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	for in, want := range map[string]string{
		"plain": "plain", "$(A)": "1", "x$(B)y": "xtwoy", "$(MISSING)": "$(MISSING)", "$$(A)": "$(A)",
		"$A": "$A", "$(A": "$(A", "cost: 5$": "cost: 5$", "$(A)$(B)$(A)": "1two1", "$$$(A)": "$1", "$()": "$()",
	} {
		require.Equal(t, want, podenv.Expand(in, lookup), in)
	}
	require.Equal(t, []string{"1", "$(C)"}, podenv.ExpandAll([]string{"$(A)", "$(C)"}, podenv.Lookup([]podenv.Var{{"A", "0"}, {"A", "1"}})))
	require.Nil(t, podenv.ExpandAll(nil, lookup))
}

func TestExpandKeepsScanningAfterAnUnterminatedReference(t *testing.T) {
	lookup := func(n string) (string, bool) { return "1", n == "A" }
	for _, tc := range []struct{ in, want string }{
		{"$(A $$B", "$(A $B"},
		{"$( $$(A", "$( $(A"},
		{"$($(A", "$($(A"},
		{"x$(", "x$("},
	} {
		require.Equal(t, tc.want, podenv.Expand(tc.in, lookup), tc.in)
	}
}

func TestServiceVarsOrderAndDockerLinks(t *testing.T) {
	vars := podenv.ServiceVars([]*v1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "a-b"}, Spec: v1.ServiceSpec{ClusterIP: "fd00::1",
		Ports: []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP}}}}})
	var names []string
	for _, v := range vars {
		names = append(names, v.Name+"="+v.Value)
	}
	require.Equal(t, strings.Join([]string{
		"A_B_SERVICE_HOST=fd00::1", "A_B_SERVICE_PORT=53", "A_B_SERVICE_PORT_DNS=53", "A_B_SERVICE_PORT_DNS_TCP=53",
		"A_B_PORT=udp://[fd00::1]:53", "A_B_PORT_53_UDP=udp://[fd00::1]:53", "A_B_PORT_53_UDP_PROTO=udp", "A_B_PORT_53_UDP_PORT=53", "A_B_PORT_53_UDP_ADDR=fd00::1",
		"A_B_PORT_53_TCP=tcp://[fd00::1]:53", "A_B_PORT_53_TCP_PROTO=tcp", "A_B_PORT_53_TCP_PORT=53", "A_B_PORT_53_TCP_ADDR=fd00::1",
	}, "\n"), strings.Join(names, "\n"))
}
