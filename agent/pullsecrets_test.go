package agent

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
	"github.com/nodekit/nodekit/runtime/fake"
)

// secretsOf is a namespace's secrets, shaped as client-go's
// CoreV1().Secrets(namespace).
type secretsOf map[string]*v1.Secret

func (s secretsOf) Get(_ context.Context, name string, _ metav1.GetOptions) (*v1.Secret, error) {
	if sec, ok := s[name]; ok {
		return sec, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
}

func TestImagePullSecretsAreSentOverCRIAndAMissingOneIsReported(t *testing.T) {
	srv, err := fakecri.NewServer(fakecri.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	rt, err := cri.New(context.Background(), cri.Config{Endpoint: srv.Endpoint(), PodLogsRoot: t.TempDir(), PodsRoot: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })

	regcred := &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "default"},
		Type:       v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(
			`{"auths":{"registry.example.com":{"username":"puller","password":"s3cret"}}}`)},
	}
	rec := podconfigtest.NewRecorder(0)
	c := fastConfig(rt)
	c.Recorder = rec
	c.Secrets = func(ns string) SecretGetter {
		if ns == "default" {
			return secretsOf{"regcred": regcred}
		}
		return secretsOf{}
	}
	r := start(t, c)
	pod := newPod("private", v1.RestartPolicyAlways, "app")
	pod.Spec.Containers[0].Image = "registry.example.com/team/app:1"
	pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "missing"}, {Name: "regcred"}}
	r.set(pod)

	waitFor(t, "pod running", func() bool { return r.phase(pod.UID) == v1.PodRunning })
	pulls := srv.Pulls()
	require.NotEmpty(t, pulls)
	assert.Equal(t, "registry.example.com/team/app:1", pulls[0].Image)
	require.NotNil(t, pulls[0].Auth, "the pull carries the secret's credential")
	assert.Equal(t, "puller", pulls[0].Auth.GetUsername())
	assert.Equal(t, "s3cret", pulls[0].Auth.GetPassword())

	var found bool
	for _, e := range rec.Events() {
		if e.Reason == ReasonFailedToRetrieveImagePullSecret {
			found = true
			assert.Equal(t, v1.EventTypeWarning, e.Type)
			assert.Contains(t, e.Message, "missing")
			assert.NotContains(t, e.Message, "regcred")
		}
	}
	assert.True(t, found, "FailedToRetrieveImagePullSecret event: %+v", rec.Events())
}

// pullSecrets runs in every SyncPod of a pod with image pull secrets; a
// cached secret costs its copy into the result and nothing more.
func BenchmarkPullSecretsCached(b *testing.B) {
	rt, err := fake.New(fake.Config{})
	require.NoError(b, err)
	c := fastConfig(rt)
	regcred := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "default"}}
	c.Secrets = func(string) SecretGetter { return secretsOf{"regcred": regcred} }
	a, err := New(c)
	require.NoError(b, err)
	pod := newPod("private", v1.RestartPolicyAlways, "app")
	pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
	ctx := context.Background()
	require.Len(b, a.pullSecrets(ctx, pod), 1)
	b.ReportAllocs()
	for b.Loop() {
		_ = a.pullSecrets(ctx, pod)
	}
}
