package cri_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/objects/objectstest"
	"github.com/nodekit/nodekit/podenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/volume"
)

// On containerd, a container reads its environment (a configMap key, a
// fieldRef, a service variable), its configMap file, its downward API
// labels file and its projected token, as a pod from a cluster would.
func TestRealEnvAndVolumes(t *testing.T) {
	endpoint := testenv.CRIEndpoint(t)
	image := testenv.TestImage(t)
	api := objectstest.New()
	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "test", Name: "app"}, Data: map[string]string{"mode": "fast", "app.conf": "answer=42"}})
	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "test", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "CA"}})
	api.Set(&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "test", Name: "default"}})
	api.Set(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []v1.ServicePort{{Name: "https", Port: 443}}}})
	cache := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets, Services: api.Services})
	tokens := objects.NewTokens(objects.TokensConfig{ServiceAccounts: api.ServiceAccounts})
	podsRoot := t.TempDir()
	vols, err := volume.New(volume.Config{PodsRoot: podsRoot, Objects: cache, Tokens: tokens})
	require.NoError(t, err)
	m, err := cri.New(context.Background(), cri.Config{Endpoint: endpoint, PodLogsRoot: t.TempDir(), PodsRoot: podsRoot,
		Env: podenv.New(podenv.Config{Objects: cache, Services: cache}), Volumes: vols})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })

	uid := types.UID("uid-envvol-" + time.Now().Format("150405.000000"))
	pod := newPod("envvol", image, func(p *v1.Pod) {
		p.UID = uid
		p.Labels = map[string]string{"app": "envvol"}
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		p.Spec.Volumes = []v1.Volume{
			{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "app"}}}},
			{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
			{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
			}}}},
		}
		p.Spec.Containers[0].Env = []v1.EnvVar{
			{Name: "MODE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "app"}, Key: "mode"}}},
			{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
			{Name: "cfg", MountPath: "/etc/app"},
			{Name: "podinfo", MountPath: "/etc/podinfo"},
			{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
		}
		p.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
		p.Spec.Containers[0].Command = []string{"sh", "-c", `
set -e
sa=/var/run/secrets/kubernetes.io/serviceaccount
printf '%s|%s|%s|%s|%s|%s|%s' "$MODE" "$POD_NAME" "$KUBERNETES_SERVICE_HOST" "$(cat /etc/app/app.conf)" "$(cat /etc/podinfo/labels)" "$(cat $sa/token)" "$(cat $sa/namespace)" > /dev/termination-log
touch /etc/app/x 2>/dev/null && exit 7 || exit 0`}
	})
	cleanup(t, m, pod)
	st := syncUntil(t, context.Background(), m, pod, nil, 100, 100*time.Millisecond, func(st *runtime.PodStatus) bool {
		c := st.FindContainerStatusByName("main")
		return c != nil && c.State == runtime.ContainerStateExited
	})
	c := st.FindContainerStatusByName("main")
	require.Equal(t, 0, c.ExitCode, "the configMap volume is read-only; message: %s", c.Message)
	require.Equal(t, `fast|envvol|10.96.0.1|answer=42|app="envvol"|token-1|test`, c.Message)
	_, err = os.Stat(filepath.Join(podsRoot, string(uid), "volumes", "kubernetes.io~projected", "kube-api-access", "..data"))
	require.NoError(t, err, "the atomic writer's layout")
}
