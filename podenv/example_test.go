package podenv_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/objects/objectstest"
	"github.com/nodekit/nodekit/podenv"
)

// A container's environment from a configMap key, a fieldRef and an
// expansion, over an in-memory API (client-go's typed clients fit the same
// fields).
func ExampleResolver_Env() {
	api := objectstest.New()
	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"}, Data: map[string]string{"port": "8080"}})
	cache := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets})
	r := podenv.New(podenv.Config{Objects: cache})

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1"}}
	c := &v1.Container{Name: "web", Env: []v1.EnvVar{
		{Name: "PORT", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "port"}}},
		{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "URL", Value: "http://$(POD):$(PORT)/"},
	}}
	vars, err := r.Env(context.Background(), pod, c, []string{"10.1.2.3"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range vars {
		fmt.Printf("%s=%s\n", v.Name, v.Value)
	}

	c.Env[0].ValueFrom.ConfigMapKeyRef.Name = "missing"
	_, err = r.Env(context.Background(), pod, c, nil)
	fmt.Println(err)
	// Output:
	// PORT=8080
	// POD=web-1
	// URL=http://web-1:8080/
	// configmaps "missing" not found
}
