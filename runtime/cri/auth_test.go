package cri_test

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

func dockerConfigSecret(json string) v1.Secret {
	return v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(json)}}
}

func TestPullSecrets(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("bob:secret"))
	secrets := []v1.Secret{
		dockerConfigSecret(`{"auths":{"https://index.docker.io/v1/":{"username":"hub","password":"pw"},"registry.example.com":{"username":"host"},"registry.example.com/team":{"auth":"` + auth + `"}}}`),
		{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{v1.DockerConfigKey: []byte(`{"registry.example.com":{"username":"legacy","password":"old"}}`)}},
		dockerConfigSecret(`not json`),
	}
	tests := []struct {
		name      string
		image     string
		wantUsers []string // usernames tried, in order; "" is anonymous
	}{
		{"docker hub short name uses the hub credential", "busybox:1.36", []string{"hub"}},
		{"docker hub path uses the hub credential", "docker.io/library/busybox", []string{"hub"}},
		{"the most specific key wins", "registry.example.com/team/app:1", []string{"bob"}},
		{"host-only key matches other paths", "registry.example.com/other/app:1", []string{"host"}},
		{"unknown registry pulls anonymously", "quay.io/x/y:1", []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEnv(t)
			_, err := e.m.PullImage(e.ctx, tt.image, secrets)
			require.NoError(t, err)
			pulls := e.srv.Pulls()
			require.Len(t, pulls, 1)
			require.Equal(t, tt.wantUsers[0], pulls[0].Auth.GetUsername())
			if tt.wantUsers[0] == "bob" {
				require.Equal(t, "secret", pulls[0].Auth.GetPassword(), "auth is decoded")
				require.Equal(t, "registry.example.com", pulls[0].Auth.GetServerAddress())
			}
		})
	}
}

func TestPullTriesEachCredential(t *testing.T) {
	e := newFakeEnv(t)
	secrets := []v1.Secret{
		dockerConfigSecret(`{"auths":{"registry.example.com":{"username":"first","password":"a"}}}`),
		dockerConfigSecret(`{"auths":{"registry.example.com":{"username":"second","password":"b"}}}`),
	}
	e.srv.FailNext("PullImage", errorString("unauthorized"))
	pod := newPod("auth", "", withImage("registry.example.com/app:1", v1.PullIfNotPresent))
	st := e.status(t, pod)
	res := e.m.SyncPod(e.ctx, pod, st, secrets, nil)
	require.NoError(t, res.Error())
	require.Equal(t, 2, e.srv.Calls("PullImage"))
	require.Equal(t, "second", e.srv.Pulls()[0].Auth.GetUsername(), "the first credential was refused")

	e.srv.SetError("PullImage", errorString("unauthorized"))
	_, err := e.m.PullImage(e.ctx, "registry.example.com/app:2", secrets)
	require.ErrorIs(t, err, runtime.ErrImagePull)
	require.Equal(t, 4, e.srv.Calls("PullImage"), "both credentials tried")
}
