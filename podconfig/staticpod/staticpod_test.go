package staticpod

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podutil"
)

const yamlPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: kube-system
  labels:
    app: web
spec:
  containers:
  - name: web
    image: nginx:1.25
    ports:
    - containerPort: 80
    resources:
      limits:
        cpu: 500m
    readinessProbe:
      httpGet:
        port: 80
  volumes:
  - name: logs
    hostPath:
      path: /var/log
`

var fileOrigin = Origin{Source: podutil.FileSource, Location: "/etc/kubernetes/manifests/web.yaml", NodeName: "Node-1"}

func mustDecodeOne(t *testing.T, data string) *v1.Pod {
	t.Helper()
	pods, err := Decode([]byte(data), false)
	require.NoError(t, err)
	require.Len(t, pods, 1)
	return pods[0]
}

func TestDecode(t *testing.T) {
	jsonPod, err := json.Marshal(&v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "j"}})
	require.NoError(t, err)
	jsonList, err := json.Marshal(&v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		Items: []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}}})
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		data      string
		allowList bool
		wantNames []string
		wantErr   string
	}{
		{name: "yaml pod decodes", data: yamlPod, wantNames: []string{"web"}},
		{name: "json pod decodes", data: string(jsonPod), wantNames: []string{"j"}},
		{name: "pod list decodes where allowed", data: string(jsonList), allowList: true, wantNames: []string{"a", "b"}},
		{name: "pod list is refused where not allowed", data: string(jsonList), wantErr: `kind "PodList", want "Pod"`},
		{name: "missing apiVersion is refused", data: "kind: Pod\nmetadata:\n  name: x\n", wantErr: `apiVersion ""`},
		{name: "other apiVersion is refused", data: "apiVersion: v1beta2\nkind: Pod\n", wantErr: `apiVersion "v1beta2"`},
		{name: "other kind is refused", data: "apiVersion: v1\nkind: Service\n", wantErr: `kind "Service"`},
		{name: "binary garbage is refused", data: "\x01\x02\x03", wantErr: "cannot decode"},
		{name: "malformed yaml is refused", data: "apiVersion: v1\nkind: Pod\nspec: [", wantErr: "cannot decode"},
		{name: "wrongly typed field is refused", data: "apiVersion: v1\nkind: Pod\nspec:\n  containers: 3\n", wantErr: "cannot decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods, err := Decode([]byte(tc.data), tc.allowList)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.True(t, errors.Is(err, ErrDecode))
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
				assert.Empty(t, p.APIVersion, "type meta is cleared")
			}
			assert.Equal(t, tc.wantNames, names)
		})
	}
}

func TestDecodeIsCaseSensitive(t *testing.T) {
	pod := mustDecodeOne(t, "apiVersion: v1\nkind: Pod\nMetadata:\n  name: x\n")
	assert.Empty(t, pod.Name, "Metadata is not metadata")
	assert.ErrorIs(t, Prepare(pod, fileOrigin), ErrInvalid)
}

func TestPrepareAppliesStaticDefaults(t *testing.T) {
	pod := mustDecodeOne(t, yamlPod)
	require.NoError(t, Prepare(pod, fileOrigin))

	assert.Equal(t, "web-node-1", pod.Name, "name suffixed with the lowercased node name")
	assert.Equal(t, "kube-system", pod.Namespace)
	assert.Equal(t, "Node-1", pod.Spec.NodeName)
	assert.Len(t, string(pod.UID), 32)
	assert.Equal(t, string(pod.UID), pod.Annotations[podutil.ConfigHashAnnotationKey])
	assert.Equal(t, podutil.FileSource, pod.Annotations[podutil.ConfigSourceAnnotationKey])
	assert.Equal(t, []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}, pod.Spec.Tolerations)
	assert.Equal(t, v1.PodPending, pod.Status.Phase)

	// API defaults.
	c := pod.Spec.Containers[0]
	assert.Equal(t, v1.RestartPolicyAlways, pod.Spec.RestartPolicy)
	assert.Equal(t, v1.DNSClusterFirst, pod.Spec.DNSPolicy)
	assert.Equal(t, ptr.To[int64](30), pod.Spec.TerminationGracePeriodSeconds)
	assert.Equal(t, v1.DefaultSchedulerName, pod.Spec.SchedulerName)
	assert.Equal(t, ptr.To(true), pod.Spec.EnableServiceLinks)
	assert.NotNil(t, pod.Spec.SecurityContext)
	assert.Equal(t, "/dev/termination-log", c.TerminationMessagePath)
	assert.Equal(t, v1.TerminationMessageReadFile, c.TerminationMessagePolicy)
	assert.Equal(t, v1.PullIfNotPresent, c.ImagePullPolicy)
	assert.Equal(t, v1.ProtocolTCP, c.Ports[0].Protocol)
	assert.Equal(t, "500m", ptr.To(c.Resources.Requests[v1.ResourceCPU]).String(), "requests default to limits")
	assert.Equal(t, "/", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, v1.URISchemeHTTP, c.ReadinessProbe.HTTPGet.Scheme)
	assert.Equal(t, int32(10), c.ReadinessProbe.PeriodSeconds)
	assert.Equal(t, int32(3), c.ReadinessProbe.FailureThreshold)
	assert.Equal(t, ptr.To(v1.HostPathUnset), pod.Spec.Volumes[0].HostPath.Type)
}

func TestPrepareDefaultsNamespaceAndKeepsExplicitUID(t *testing.T) {
	pod := mustDecodeOne(t, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  uid: my-uid\nspec:\n  containers:\n  - name: c\n    image: busybox\n")
	require.NoError(t, Prepare(pod, Origin{Source: podutil.HTTPSource, Location: "http://h/m", NodeName: "n"}))
	assert.Equal(t, metav1.NamespaceDefault, pod.Namespace)
	assert.Equal(t, "my-uid", string(pod.UID))
	assert.Equal(t, "my-uid", pod.Annotations[podutil.ConfigHashAnnotationKey])
	assert.Empty(t, pod.Spec.Tolerations, "URL pods get no toleration")
	assert.Equal(t, v1.PullAlways, pod.Spec.Containers[0].ImagePullPolicy, "untagged image is pulled always")
}

func TestGeneratedUIDDependsOnContentNodeAndLocation(t *testing.T) {
	uid := func(data string, o Origin) string {
		p := mustDecodeOne(t, data)
		require.NoError(t, Prepare(p, o))
		return string(p.UID)
	}
	base := uid(yamlPod, fileOrigin)
	assert.Equal(t, base, uid(yamlPod, fileOrigin), "same manifest, same UID")
	other := fileOrigin
	other.NodeName = "node-2"
	assert.NotEqual(t, base, uid(yamlPod, other), "node enters the UID")
	other = fileOrigin
	other.Location = "/elsewhere.yaml"
	assert.NotEqual(t, base, uid(yamlPod, other), "path enters the UID")
	assert.NotEqual(t, base, uid(strings.Replace(yamlPod, "nginx:1.25", "nginx:1.26", 1), fileOrigin), "content enters the UID")
}

func TestStaticPodNameGenerate(t *testing.T) {
	for _, tc := range []struct{ node, pod, want string }{
		{"node1", "static-pod1", "static-pod1-node1"},
		{"Node1", "static-pod1", "static-pod1-node1"},
		{"NODE1", "static-pod1", "static-pod1-node1"},
	} {
		assert.Equal(t, tc.want, GeneratePodName(tc.pod, tc.node))
	}
	p := validPod()
	p.Name = "static-pod1-NODE1"
	assert.ErrorIs(t, Validate(p), ErrInvalid, "upper case is not a DNS-1123 name")
}

func validPod() *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-node", Namespace: "default", UID: "u"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "busybox:1", VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/v"}}}},
			Volumes:    []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp"}}}},
		},
	}
	SetAPIDefaults(p)
	return p
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(p *v1.Pod)
		wantErr string // "" = valid
	}{
		{"valid pod passes", func(*v1.Pod) {}, ""},
		{"downward API volume is allowed", func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}})
		}, ""},
		{"invalid volume name", func(p *v1.Pod) { p.Spec.Volumes[0].Name = "_INVALID_" }, "spec.volumes[0].name"},
		{"duplicate volume names", func(p *v1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, p.Spec.Volumes[0]) }, "Duplicate value"},
		{"volume with two sources", func(p *v1.Pod) { p.Spec.Volumes[0].EmptyDir = &v1.EmptyDirVolumeSource{} }, "exactly one volume type"},
		{"mount of an unknown volume", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].Name = "nope" }, "volumeMounts[0].name"},
		{"unspecified container name", func(p *v1.Pod) { p.Spec.Containers[0].Name = "" }, "spec.containers[0].name: Required"},
		{"invalid container name", func(p *v1.Pod) { p.Spec.Containers[0].Name = "_INVALID_" }, "spec.containers[0].name"},
		{"duplicate container names across init and regular", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "c", Image: "i", ImagePullPolicy: v1.PullAlways}}
		}, "Duplicate value"},
		{"missing image", func(p *v1.Pod) { p.Spec.Containers[0].Image = "" }, "image: Required"},
		{"image with whitespace", func(p *v1.Pod) { p.Spec.Containers[0].Image = " busybox" }, "whitespace"},
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil }, "at least one container"},
		{"bad port", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 70000, Protocol: v1.ProtocolTCP}}
		}, "containerPort"},
		{"bad restart policy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, "restartPolicy"},
		{"bad namespace", func(p *v1.Pod) { p.Namespace = "Not_OK" }, "metadata.namespace"},
		{"bad label", func(p *v1.Pod) { p.Labels = map[string]string{"a b": "c"} }, "metadata.labels"},
		{"secret volume is refused", func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}}})
		}, "may not reference secrets"},
		{"configmap env is refused", func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{Key: "k"}}}}
		}, "may not reference configmaps"},
		{"secret envFrom is refused", func(p *v1.Pod) {
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{}}}
		}, "may not reference secrets"},
		{"image pull secrets are refused", func(p *v1.Pod) { p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "r"}} }, "may not reference secrets"},
		{"service account is refused", func(p *v1.Pod) { p.Spec.ServiceAccountName = "sa" }, "may not reference serviceaccounts"},
		{"cluster trust bundle is refused", func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "ctb", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("b"), Path: "p"}}}}}})
		}, "may not reference clustertrustbundles"},
		{"resource claims are refused", func(p *v1.Pod) {
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "c", ResourceClaimName: ptr.To("x")}}
		}, "may not reference resourceclaims"},
		{"persistent volume claim is refused", func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "pvc", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}})
		}, "may not reference persistentvolumeclaims"},
		{"rbd with a secret is refused", func(p *v1.Pod) {
			p.Spec.Volumes[0].HostPath = nil
			p.Spec.Volumes[0].RBD = &v1.RBDVolumeSource{SecretRef: &v1.LocalObjectReference{Name: "s"}}
		}, "may not reference secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := validPod()
			tc.mutate(p)
			err := Validate(p)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestPrepareRejectsPodWithoutName(t *testing.T) {
	p := validPod()
	p.Name = ""
	err := Prepare(p, fileOrigin)
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "name is needed")
}

func TestVolumeWithoutSourceDefaultsToEmptyDir(t *testing.T) {
	p := validPod()
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "scratch"})
	SetAPIDefaults(p)
	assert.NotNil(t, p.Spec.Volumes[1].EmptyDir)
	assert.NoError(t, Validate(p))
}
