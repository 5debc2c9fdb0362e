package cri_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/objects/objectstest"
	"github.com/nodekit/nodekit/podenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
)

// createdEnvs records the environment of every CreateContainer call.
type createdEnvs struct {
	mu   sync.Mutex
	envs []map[string]string
}

func (c *createdEnvs) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*runtimeapi.CreateContainerRequest); ok {
		m := map[string]string{}
		for _, kv := range r.GetConfig().GetEnvs() {
			m[kv.Key] = string(kv.Value)
		}
		c.mu.Lock()
		c.envs = append(c.envs, m)
		c.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *createdEnvs) last() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.envs) == 0 {
		return nil
	}
	return c.envs[len(c.envs)-1]
}

func TestEnvFromAPIObjects(t *testing.T) {
	api := objectstest.New()
	cache := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets})
	rec := &createdEnvs{}
	e := newFakeEnv(t, func(c *cri.Config) {
		c.Env = podenv.New(podenv.Config{Objects: cache})
		c.DialOptions = append(c.DialOptions, grpc.WithChainUnaryInterceptor(rec.interceptor))
	})
	pod := newPod("env", "busybox:1", func(p *v1.Pod) {
		p.Spec.Containers[0].Env = []v1.EnvVar{
			{Name: "NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "MODE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "mode"}}},
		}
		p.Spec.Containers[0].Args = []string{"$(MODE)"}
	})

	t.Run("missing configMap: CreateContainerConfigError with the kubelet's message, nothing created", func(t *testing.T) {
		res := e.sync(t, pod, nil)
		require.ErrorIs(t, res.Error(), runtime.ErrCreateContainerConfig)
		require.Contains(t, res.Error().Error(), `configmaps "cfg" not found`)
		require.Zero(t, e.srv.Calls("CreateContainer"))
	})
	t.Run("starts once the configMap exists, with every value resolved", func(t *testing.T) {
		api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "test", Name: "cfg"}, Data: map[string]string{"mode": "fast"}})
		res := e.sync(t, pod, nil)
		require.NoError(t, res.Error())
		require.Equal(t, 1, e.srv.Calls("CreateContainer"))
		env := rec.last()
		require.Equal(t, "env", env["NAME"])
		require.Equal(t, "fast", env["MODE"])
		require.NotEmpty(t, env["IP"], "the new sandbox's IP")
	})
}

func TestEnvWithoutSourcesIsAConfigError(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("envfrom", "busybox:1", func(p *v1.Pod) {
		p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}}
	})
	res := e.sync(t, pod, nil)
	require.Equal(t, "CreateContainerConfigError", runtime.Reason(res.Error()))
	require.ErrorIs(t, res.Error(), podenv.ErrNoSource)
	require.Zero(t, e.srv.Calls("CreateContainer"))
}
